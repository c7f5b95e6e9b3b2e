"""A pickle interpreter that builds plain data and nothing else (:func:`load`), for
:mod:`seqjit.convert.torch_checkpoint`.

Python's own unpickler calls whatever the file names, and even with ``find_class`` narrowed its BUILD
opcode sets attributes on any object on the stack, an admitted class included, so one file can change
how the next one is read. This interpreter reads the binary opcodes of protocols 2 to 5 itself:

- a global is admitted only through the caller's ``globals_`` table, whose values are either plain
  values (``torch.float32`` -> a dtype name) or :class:`StandIn` objects the caller creates afresh for
  each read; REDUCE and NEWOBJ call a stand-in's own function, nothing else can be called;
- APPEND(S), SETITEM(S) and ADDITEMS only add to a list, dict or set this read built; BUILD only
  updates the instance dict of an object a ``buildable`` stand-in built during this read (an
  ``OrderedDict``, a ``Namespace``), with a dict of plain ``str`` names that are not dunders: a class,
  a function or a stand-in is never changed;
- every length an opcode claims is checked against the bytes left in the pickle before anything is
  read or allocated, and the MARK nesting is bounded, so memory stays linear in the pickle's size;
- dict keys and set items are scalars or flat tuples of scalars (:func:`flat_key`): DUP and the memo
  let a few bytes build a tuple whose tree doubles at every level, and hashing one walks the whole
  tree (2**60 steps from 130 bytes); errors show values through :func:`shown`, which is bounded;
- the text opcodes of protocols 0 and 1 (which ``torch.save`` does not write), INST/OBJ, out-of-band
  buffers and unknown opcodes are refused, naming the opcode and its offset.

Every failure is a :class:`~seqjit.errors.ModelFormatError` naming ``where``.
"""
from __future__ import annotations

import reprlib
import struct
from collections import OrderedDict as _ORDERED  # SETITEM targets: a dict or an OrderedDict

from seqjit.errors import ModelFormatError

#: the deepest MARK nesting read (each nested container of a pickle opens at most one MARK)
MAX_MARK_DEPTH = 200


class StandIn:
    """What an admitted global stands for: ``call(*args)`` for REDUCE, ``new(*args)`` for NEWOBJ;
    ``buildable``: BUILD may then update the instance dict of what it returns."""

    __slots__ = ("name", "call", "new", "buildable")

    def __init__(self, name: str, call=None, *, new=None, buildable: bool = False):
        self.name, self.call, self.new, self.buildable = name, call, new, buildable

    def __repr__(self):
        return f"<stand-in for {self.name}>"


_SCALARS = (str, bytes, int, float, complex, bool, type(None))
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxlong, _SHOWN.maxother = 3, 60, 40, 60


def flat_key(key, scalars=_SCALARS) -> bool:
    """Whether ``key`` may be hashed at a cost linear in its size: a scalar or a tuple of scalars."""
    return type(key) in scalars or (type(key) is tuple and all(type(k) in scalars for k in key))


def shown(value) -> str:
    """``repr(value)`` cut short at every level (a plain repr of a shared-subtree tuple is exponential)."""
    try:
        return _SHOWN.repr(value)
    except (ValueError, RecursionError):  # an int of more digits than Python prints
        return f"<{type(value).__name__}>"


class _Reader:
    def __init__(self, data: bytes, where: str, globals_: dict, persistent_load, scalars: tuple):
        self.data, self.pos, self.where, self.scalars = data, 0, where, scalars
        self.globals, self.persistent_load = globals_, persistent_load
        self.stack, self.marks, self.memo = [], [], {}
        self.built = {}  # id -> object, for the objects BUILD may update (kept alive here)

    def key(self, key, what: str):
        if not flat_key(key, self.scalars):
            self.fail(f"{what} with a {type(key).__name__} key (keys are scalars or flat tuples of scalars)")
        return key

    def fail(self, what: str):
        raise ModelFormatError(f"{self.where}: {what} (at byte {self.pos} of {len(self.data)})")

    def take(self, n: int) -> bytes:
        if n < 0 or n > len(self.data) - self.pos:
            self.fail(f"a length of {n} bytes is claimed, {len(self.data) - self.pos} are left")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def uint(self, n: int) -> int:
        return int.from_bytes(self.take(n), "little")

    def push(self, item):  # after pop_mark: self.stack is read only once the MARK is closed
        self.stack.append(item)

    def pop(self):
        if not self.stack:
            self.fail("the pickle pops from an empty stack")
        return self.stack.pop()

    def pop_mark(self) -> list:
        if not self.marks:
            self.fail("the pickle closes a MARK it never opened")
        items, self.stack = self.stack, self.marks.pop()
        return items

    def top(self, kinds: tuple, what: str):
        if not self.stack or type(self.stack[-1]) not in kinds:
            self.fail(f"{what} applied to {type(self.stack[-1]).__name__ if self.stack else 'nothing'}")
        return self.stack[-1]

    def global_(self, module, name):
        if not isinstance(module, str) or not isinstance(name, str):
            self.fail("a global is named by something other than two strings")
        key = (module, name)
        if key not in self.globals:
            self.fail(f"the pickle names {module}.{name}, which seqjit does not admit (it reads tensors, plain "
                      "containers and OpenNMT-py's options only; nothing runs)")
        self.stack.append(self.globals[key])

    def made(self, stand_in, result):
        if stand_in.buildable:
            self.built[id(result)] = result
        self.stack.append(result)

    def reduce(self, stand_in, args, how: str):
        fn = getattr(stand_in, how) if isinstance(stand_in, StandIn) else None
        if fn is None:
            self.fail(f"{how} of {stand_in!r}, which cannot be called")
        if type(args) is not tuple:
            self.fail(f"{stand_in.name} is called with {type(args).__name__}, not a tuple of arguments")
        self.made(stand_in, fn(*args))

    def build(self):
        state, inst = self.pop(), self.pop()
        if id(inst) not in self.built or self.built[id(inst)] is not inst:
            self.fail(f"BUILD on {type(inst).__name__}, which this read did not build as an instance with state")
        if type(state) is not dict or not all(type(k) is str and not k.startswith("__") for k in state):
            self.fail(f"BUILD with a state other than a dict of plain attribute names ({type(state).__name__})")
        vars(inst).update(state)
        self.stack.append(inst)

    def run(self):
        data, ops = self.data, _OPS
        while self.pos < len(data):
            code = data[self.pos]
            self.pos += 1
            op = ops.get(code)
            if op is None:
                self.pos -= 1
                self.fail(f"opcode {bytes([code])!r} is not read (only the binary opcodes torch.save writes)")
            if op(self) is _STOP:
                if self.marks or len(self.stack) != 1:
                    self.fail("STOP with objects or MARKs left over")
                return self.stack.pop()
        self.fail("the pickle ends without STOP; it is truncated")


_STOP = object()
_DOUBLE = struct.Struct(">d")


def _proto(r):
    version = r.uint(1)
    if not 2 <= version <= 5:
        r.fail(f"pickle protocol {version} is not read (torch.save writes 2 to 5)")


def _frame(r):
    if r.uint(8) > len(r.data) - r.pos:
        r.fail("a FRAME claims more bytes than are left")


def _mark(r):
    if len(r.marks) >= MAX_MARK_DEPTH:
        r.fail(f"MARKs nest deeper than {MAX_MARK_DEPTH}")
    r.marks.append(r.stack)
    r.stack = []


def _memo_get(r, key):
    if key not in r.memo:
        r.fail(f"memo entry {key} is read before it is written")
    r.stack.append(r.memo[key])


def _memo_put(r, key):
    if not r.stack:
        r.fail("the pickle memoizes from an empty stack")
    r.memo[key] = r.stack[-1]


def _dup(r):
    if not r.stack:
        r.fail("DUP on an empty stack")
    r.stack.append(r.stack[-1])


def _append(r):
    item = r.pop()
    r.top((list,), "APPEND").append(item)


def _appends(r):
    items = r.pop_mark()
    r.top((list,), "APPENDS").extend(items)


def _setitems(r):
    items = r.pop_mark()
    if len(items) % 2:
        r.fail("SETITEMS with an odd number of items")
    target = r.top((dict, _ORDERED), "SETITEMS")
    for i in range(0, len(items), 2):
        target[r.key(items[i], "SETITEMS")] = items[i + 1]


def _setitem(r):
    value, key = r.pop(), r.pop()
    r.top((dict, _ORDERED), "SETITEM")[r.key(key, "SETITEM")] = value


def _additems(r):
    items = r.pop_mark()
    r.top((set,), "ADDITEMS").update(r.key(item, "ADDITEMS") for item in items)


def _dict(r):
    items = r.pop_mark()
    if len(items) % 2:
        r.fail("DICT with an odd number of items")
    r.push({r.key(items[i], "DICT"): items[i + 1] for i in range(0, len(items), 2)})


def _tuple_n(n):
    def op(r):
        if len(r.stack) < n:
            r.fail(f"TUPLE{n} with fewer than {n} items")
        items = tuple(r.stack[len(r.stack) - n:])
        del r.stack[len(r.stack) - n:]
        r.stack.append(items)
    return op


def _stack_global(r):
    name, module = r.pop(), r.pop()
    r.global_(module, name)


def _global(r):
    module = _line(r)
    r.global_(module, _line(r))


def _line(r) -> str:
    end = r.data.find(b"\n", r.pos)
    if end < 0:
        r.fail("a GLOBAL name has no end of line")
    raw = r.take(end - r.pos)
    r.pos += 1
    try:
        return raw.decode("ascii")
    except UnicodeDecodeError:
        r.fail("a GLOBAL name is not ASCII")


def _newobj_ex(r):
    kwargs, args, cls = r.pop(), r.pop(), r.pop()
    if kwargs != {}:
        r.fail("NEWOBJ_EX with keyword arguments")
    r.reduce(cls, args, "new")


def _reduce(r):
    args = r.pop()
    r.reduce(r.pop(), args, "call")


def _newobj(r):
    args = r.pop()
    r.reduce(r.pop(), args, "new")


def _persid(r):
    r.stack.append(r.persistent_load(r.pop()))


def _pop(r):
    if r.stack:
        r.stack.pop()
    else:
        r.pop_mark()


def _counted(width: int, decode):
    """An opcode whose ``width``-byte length precedes its bytes: pushes ``decode(bytes)`` (the hot
    path of a vocabulary's strings, so written out without helpers)."""
    def op(r):
        data, pos = r.data, r.pos
        start = pos + width
        end = start + int.from_bytes(data[pos:start], "little")
        if end > len(data):
            r.fail(f"a length of {end - start} bytes is claimed, {max(len(data) - start, 0)} are left")
        r.pos = end
        r.stack.append(decode(data[start:end]))
    return op


def _utf8(raw: bytes) -> str:
    return raw.decode("utf-8")  # UnicodeDecodeError: a ValueError, reported by load()


def _memo_op(width: int, put: bool):
    """(LONG_)BINPUT / (LONG_)BINGET with a ``width``-byte index."""
    def op(r):
        pos = r.pos
        if pos + width > len(r.data):
            r.fail("a memo index is cut off")
        r.pos = pos + width
        key = int.from_bytes(r.data[pos:pos + width], "little")
        (_memo_put if put else _memo_get)(r, key)
    return op


def _value(read):
    """An opcode that pushes ``read(r)``."""
    return lambda r: r.stack.append(read(r))


def _signed(r, n: int) -> int:
    return int.from_bytes(r.take(n), "little", signed=True)


_OPS = {  # opcode byte -> its action (the names are pickletools')
    0x80: _proto, 0x95: _frame, ord("."): lambda r: _STOP,  # PROTO FRAME STOP
    ord("("): _mark, ord("0"): _pop, ord("1"): lambda r: r.pop_mark(), ord("2"): _dup,  # MARK POP POP_MARK DUP
    ord("N"): _value(lambda r: None), 0x88: _value(lambda r: True), 0x89: _value(lambda r: False),
    ord("J"): _value(lambda r: _signed(r, 4)), ord("K"): _value(lambda r: r.uint(1)),  # BININT BININT1
    ord("M"): _value(lambda r: r.uint(2)), 0x8a: _value(lambda r: _signed(r, r.uint(1))),  # BININT2 LONG1
    0x8b: _value(lambda r: _signed(r, r.uint(4))), ord("G"): _value(lambda r: _DOUBLE.unpack(r.take(8))[0]),
    ord("X"): _counted(4, _utf8), 0x8c: _counted(1, _utf8), 0x8d: _counted(8, _utf8),  # BINUNICODE(8), SHORT_
    ord("B"): _counted(4, bytes), ord("C"): _counted(1, bytes), 0x8e: _counted(8, bytes),  # BINBYTES(8), SHORT_
    0x96: _counted(8, bytearray),  # BYTEARRAY8
    ord("]"): _value(lambda r: []), ord("a"): _append, ord("e"): _appends,  # EMPTY_LIST APPEND APPENDS
    ord("l"): lambda r: r.push(r.pop_mark()),  # LIST
    ord(")"): _value(lambda r: ()), ord("t"): lambda r: r.push(tuple(r.pop_mark())),  # EMPTY_TUPLE TUPLE
    0x85: _tuple_n(1), 0x86: _tuple_n(2), 0x87: _tuple_n(3),
    ord("}"): _value(lambda r: {}), ord("d"): _dict, ord("s"): _setitem, ord("u"): _setitems,
    0x8f: _value(lambda r: set()), 0x90: _additems,  # EMPTY_SET ADDITEMS
    ord("c"): _global, 0x93: _stack_global, ord("R"): _reduce, 0x81: _newobj, 0x92: _newobj_ex,
    ord("b"): lambda r: r.build(), ord("Q"): _persid,  # BUILD BINPERSID
    ord("q"): _memo_op(1, True), ord("r"): _memo_op(4, True), 0x94: lambda r: _memo_put(r, len(r.memo)),
    ord("h"): _memo_op(1, False), ord("j"): _memo_op(4, False),  # (LONG_)BINGET; before: (LONG_)BINPUT MEMOIZE
}


def load(data: bytes, where: str, globals_: dict, persistent_load, *, key_types: tuple = ()):
    """The object pickled in ``data`` (module docstring). ``globals_``: ``(module, name)`` -> value or
    :class:`StandIn`; ``persistent_load(pid)``: the object a BINPERSID reference stands for;
    ``key_types``: immutable types of the caller's own that may be dict keys besides scalars."""
    try:
        return _Reader(data, where, globals_, persistent_load, _SCALARS + tuple(key_types)).run()
    except ModelFormatError:
        raise
    except (TypeError, ValueError, OverflowError, RecursionError, IndexError, KeyError, struct.error) as exc:
        raise ModelFormatError(f"{where}: not a pickle seqjit can read ({type(exc).__name__}: "
                               f"{str(exc)[:200]})") from None
