"""One opcode list, as ggml checks ``GGML_OP_COUNT``: the VM's ``cdef enum`` and dispatch are generated
from ``seqjit.graph.opcodes.OPCODES`` (``setup.py`` writes ``_opcodes.pxi``), the lowering numbers its
instructions from the same list, each opcode's ``run_<opcode>`` (which the dispatch calls) is defined in
its kernel family's ``_native.pxi`` (or the VM's ``_vm_ops.pxi``), and some op's native lowering
(``OpDef.native``, beside the op in ``seqjit/graph/ops/``) or the lowering's own services emit each.

Named operands: each opcode declares its operands (``OPERANDS``); ``setup.py`` generates their index
constants (``_operands.pxi``), every operand a ``run_`` function reads is read by its declared name
(never by position), every declared operand is read, and every lowering's ``emit`` passes exactly the
declared names (checked here from the sources, and by ``emit`` at lowering time). A half-added opcode,
or an opcode whose ``run_`` reads an operand its lowering did not emit, fails here. Read from the
sources (and the declarations), so nothing is built; the built VM checks its own declarations at import.
"""
import ast
import re
from pathlib import Path

import numpy as np
import pytest

from seqjit.graph import opcodes
from seqjit.graph.native_ops import OP, OperandError, copy_operands, operand_lists
from seqjit.graph.ops import OPS

ROOT = Path(__file__).resolve().parents[2]
GRAPH = ROOT / "src" / "seqjit" / "graph"
VM = (GRAPH / "_native_vm.pyx").read_text(encoding="utf-8")
#: where run_<opcode> functions live: the kernel families' pxi files and the VM's own ops
RUN_FILES = [GRAPH / "_vm_ops.pxi", *sorted((ROOT / "kernels").glob("*/*.pxi"))]
LOWERING_FILES = [GRAPH / "native_ops.py", GRAPH / "lowering.py", *sorted((GRAPH / "ops").glob("*.py"))]
#: an instruction's operand read: ``c.p[...]``, ``c.i[...]``, ``c.f[...]``
READ = re.compile(r"\bc\.([pif])\[([^\]]*)\]")
#: the index constant of an operand: <OPCODE>_<P|I|F>_<NAME>
CONSTANTS = {opcodes.operand_constant(op, kind, name): (op, kind, name)
             for op, kinds in opcodes.OPERANDS.items() for kind, names in enumerate(kinds) for name in names}


def lowering_sources() -> dict:
    return {p.name: p.read_text(encoding="utf-8") for p in LOWERING_FILES}


def run_sources() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in RUN_FILES)


def functions(text: str) -> list:
    """(name, body) of each top-level Cython function of ``text`` (and (None, text) for the rest)."""
    parts = re.split(r"(?m)^(?=cdef |def |cpdef |include |DEF )", text)
    out = []
    for part in parts:
        m = re.match(r"c?p?def [^(]*?\b(\w+)\(", part)
        out.append((m.group(1) if m else None, part))
    return out


def read_errors(runs: str, vm: str = VM) -> list:
    """What is wrong with the operand reads: a read by position, by a name its opcode does not declare
    (or another opcode's), outside a run_/team_ function, and a declared operand no one reads."""
    errors, read = [], set()
    for name, body in functions(runs):
        m = re.fullmatch(r"(?:run|team)_(\w+)", name or "")
        op = m.group(1) if m and m.group(1) in opcodes.OPERANDS else None
        for array, index in READ.findall(body):
            const = CONSTANTS.get(index.strip())
            if op is None:
                errors.append(f"{name or 'module level'}: reads c.{array}[{index}] outside a run_/team_ function")
            elif const is None or const[0] != op or "pif"[const[1]] != array:
                errors.append(f"run_{op}: reads c.{array}[{index}], not an operand {op} declares as c.{array}")
            else:
                read.add(const)
    for array, index in re.findall(r"\.([pif])\[(\d+)\]", vm):
        errors.append(f"_native_vm.pyx: reads .{array}[{index}] by position")
    read |= {CONSTANTS[c] for c in re.findall(r"\b[A-Z0-9_]+_[PIF]_[A-Z0-9_]+\b", vm) if c in CONSTANTS}
    errors += [f"{op}: operand {name} is declared but no run_ function reads it"
               for op, kind, name in CONSTANTS.values() if (op, kind, name) not in read]
    return errors


def emissions(sources: dict):
    """(sites, errors): sites maps each opcode to the places that emit it; errors: each ``emit`` whose
    operands are not exactly its opcode's declared names (or that passes them positionally or as
    ``**``). An ``emit`` whose opcode is a parameter of its function (``_emit_elementwise``) is
    checked for each literal opcode the function is called with."""
    trees = {f: ast.parse(s) for f, s in sources.items()}
    defs = {n.name: n for t in trees.values() for n in ast.walk(t) if isinstance(n, ast.FunctionDef)}
    calls = [(f, n) for f, t in trees.items() for n in ast.walk(t) if isinstance(n, ast.Call)]
    parents = {c: fn for fn in defs.values() for c in ast.walk(fn)}

    def called(node):
        return node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)

    def literal_ops(call, where):
        """The opcodes of ``call``'s first argument: a string, or a parameter of the enclosing function."""
        arg = call.args[0] if call.args else None
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return [arg.value]
        fn = parents.get(call)
        params = [a.arg for a in fn.args.args] if fn is not None else []
        if not isinstance(arg, ast.Name) or arg.id not in params:
            errors.append(f"{where}: opcode is neither a string nor a parameter")
            return []
        k = params.index(arg.id) - (params[:1] == ["self"])
        return [op for _, c in calls if called(c) == fn.name for op in literal_ops_at(c, k, where)]

    def literal_ops_at(call, k, where):
        arg = call.args[k] if len(call.args) > k else None
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return [arg.value]
        errors.append(f"{where}: {call.func.attr if isinstance(call.func, ast.Attribute) else ''} called "
                      "without a literal opcode")
        return []

    sites, errors = {}, []
    for f, call in calls:
        name = called(call)
        if name not in ("emit", "operand_lists"):
            continue
        where = f"{f}:{call.lineno}"
        if name == "operand_lists" and getattr(parents.get(call), "name", None) == "emit":
            continue  # emit's own check, of every emit counted here
        for op in literal_ops(call, where):
            sites.setdefault(op, []).append(where)
            if name == "operand_lists":  # names checked at lowering time by operand_lists itself
                continue
            decl = opcodes.OPERANDS.get(op)
            passed = {k.arg for k in call.keywords} - {"threads", "keep"}
            if decl is None:
                errors.append(f"{where}: emits {op!r}, which is not an opcode")
            elif len(call.args) > 1 or None in passed:
                errors.append(f"{where}: emit({op!r}) passes operands by position or **")
            elif passed != {n for names in decl for n in names}:
                declared = {n for names in decl for n in names}
                errors.append(f"{where}: emit({op!r}) misses {sorted(declared - passed)}, "
                              f"passes undeclared {sorted(passed - declared)}")
    return sites, errors


def missing(runs: str, lowering: dict, op_table: dict) -> list:
    """What a half-added opcode lacks: (opcode, "run" or "lowering") pairs (``run``: its
    ``run_<opcode>`` with the dispatch's signature)."""
    sites, _ = emissions(lowering)
    gaps = []
    for name in op_table:
        signature = (rf"^cdef inline int run_{name}\(Instr\* c, int nt, bint team, Py_ssize_t\* err\) "
                     r"noexcept nogil:")
        if name not in opcodes.VM_ONLY and not re.search(signature, runs, flags=re.M):
            gaps.append((name, "run"))
        if name not in opcodes.VM_ONLY and name not in sites:
            gaps.append((name, "lowering"))
    return gaps


def test_the_generated_enum_is_the_list():
    """``_opcodes.pxi`` is what setup.py writes from the list now (a list edited without a build fails)."""
    assert (GRAPH / "_opcodes.pxi").read_text(encoding="utf-8") == opcodes.pxi_text()
    assert 'include "_opcodes.pxi"' in VM and 'include "_operands.pxi"' in VM
    assert not re.search(r"^\s+OP_\w+\s*=\s*\d+", VM, flags=re.M), "an opcode numbered by hand in the VM"
    assert not re.search(r"\bc\.op == OP_(?!PYCALL)", VM), "an opcode dispatched by hand in the VM"
    assert set(opcodes.TEAM_IF) <= set(opcodes.TEAM) <= set(opcodes.OPCODES)
    assert OP is opcodes.OP and len(OP) == len(opcodes.OPCODES) == len(set(opcodes.OPCODES))


def test_the_built_vm_holds_the_same_list():
    """A VM built from another list or other operands refuses to load (ImportError, naming the
    rebuild), so this fails too."""
    from seqjit.graph import _native_vm

    assert tuple(_native_vm.BUILT_OPCODES) == opcodes.OPCODES
    assert _native_vm.BUILT_OPERANDS == opcodes.OPERANDS


def test_every_opcode_is_run_by_the_vm_and_emitted_by_a_lowering():
    assert missing(run_sources(), lowering_sources(), OP) == []
    assert re.search(r"\bc\.op == OP_PYCALL\b", VM)  # the VM's own, emitted by add_callback
    for name in opcodes.TEAM_IF:  # the per-instruction team decision the generated policy calls
        signature = rf"^cdef inline bint team_{name}\(Instr\* c\) noexcept nogil:"
        assert re.search(signature, run_sources(), flags=re.M)


def test_every_native_lowering_is_an_ops_own():
    """Each op's lowering is declared on its OpDef (none left in the shared module by name)."""
    assert not re.search(r"^\s+def op_\w+\(", (GRAPH / "native_ops.py").read_text(encoding="utf-8"), flags=re.M)
    lowered = {name for name, op in OPS.items() if op.native is not None}
    assert {"linear", "attention", "gru_cell", "kv_write", "rms_norm"} <= lowered


def test_the_check_sees_a_half_added_opcode():
    """Guards the guard: an opcode added to the list with no run_ function and no lowering, or whose
    only lowering or run_ function is taken away, fails."""
    table = {**OP, "t5_bias": max(OP.values()) + 1}
    assert missing(run_sources(), lowering_sources(), table) == [("t5_bias", "run"), ("t5_bias", "lowering")]
    without_rms = {f: s.replace('self.emit("rms_norm",', "self.emit(name,") for f, s in lowering_sources().items()}
    assert ("rms_norm", "lowering") in missing(run_sources(), without_rms, OP)
    without_mul = {f: s.replace('_emit_elementwise(node, "mul")', "_emit_elementwise(node, op)")
                   for f, s in lowering_sources().items()}
    assert ("mul", "lowering") in missing(run_sources(), without_mul, OP)
    without_run = run_sources().replace("cdef inline int run_mul(", "cdef inline int run_mul_(")
    assert missing(without_run, lowering_sources(), OP) == [("mul", "run")]


# -- named operands --------------------------------------------------------------------------------
def test_every_opcode_declares_its_operands_within_an_instruction():
    assert opcodes.declaration_errors() == []
    assert list(opcodes.OPERANDS) == list(opcodes.OPCODES)  # declared in the list's order


def test_the_generated_constants_are_the_declared_positions():
    """``_operands.pxi`` (setup.py's text) numbers each operand by its place in the declaration."""
    text = opcodes.operands_pxi_text()
    found = dict(re.findall(r"^    (\w+) = (\d+)$", text, flags=re.M))
    assert {c: int(k) for c, k in found.items()} == {
        c: opcodes.OPERANDS[op][kind].index(name) for c, (op, kind, name) in CONSTANTS.items()}
    assert len(found) == len(CONSTANTS)  # no two operands share a constant
    built = GRAPH / "_operands.pxi"
    if built.exists():  # a build output (git ignores it): what the VM in this tree was built from
        assert built.read_text(encoding="utf-8") == text


def test_every_run_function_reads_its_declared_operands_by_name():
    assert read_errors(run_sources()) == []


def test_every_emit_passes_exactly_the_declared_operands():
    sites, errors = emissions(lowering_sources())
    assert errors == []
    assert set(sites) == set(opcodes.OPCODES) - set(opcodes.VM_ONLY)
    # the copies emitted through operand_lists: their names are the declaration's
    assert operand_lists("copy", copy_operands(1, 2, (1, 2, 3, 4), (24, 12, 4, 1), (24, 12, 4, 1), 4)) == (
        [1, 2], [1, 2, 3, 4, 24, 12, 4, 1, 24, 12, 4, 1, 4], [])


def test_the_check_sees_an_operand_mismatch():
    """Guards the guard: a run_ function reading an undeclared operand, another opcode's, or one by
    position; an emit missing an operand or passing an undeclared one; a declared operand no
    run_ function reads: each fails."""
    runs = run_sources()
    assert "LAYER_NORM_P_BIAS" in runs and "c.i[LAYER_NORM_I_M]" in runs
    for injected, said in (
            (runs.replace("c.p[LAYER_NORM_P_BIAS]", "c.p[LAYER_NORM_P_SHIFT]"), "LAYER_NORM_P_SHIFT"),
            (runs.replace("c.p[LAYER_NORM_P_BIAS]", "c.p[RMS_NORM_P_X]"), "RMS_NORM_P_X"),
            (runs.replace("c.i[LAYER_NORM_I_M]", "c.i[0]"), "c.i[0]"),
            (runs.replace("c.i[LAYER_NORM_I_M]", "c.p[LAYER_NORM_I_M]"), "c.p[LAYER_NORM_I_M]")):
        errors = read_errors(injected)
        assert any(said in e and "run_layer_norm" in e for e in errors), errors
    assert any("by position" in e for e in read_errors(runs, VM.replace("c.i[PYCALL_I_CALLBACK]", "c.i[0]")))
    unread = read_errors(runs.replace("c.p[LAYER_NORM_P_BIAS]", "NULL"))
    assert unread == ["layer_norm: operand bias is declared but no run_ function reads it"]

    low = lowering_sources()
    assert low["kernel_ops.py"].count("weight=g, bias=b, y=y") == 1
    for edit, said in (("weight=g, y=y", "misses ['bias']"), ("weight=g, shift=b, y=y", "passes undeclared ['shift']")):
        injected = {**low, "kernel_ops.py": low["kernel_ops.py"].replace("weight=g, bias=b, y=y", edit)}
        _, errors = emissions(injected)
        assert len(errors) == 1 and "emit('layer_norm')" in errors[0] and said in errors[0], errors
    t5 = low["t5_ops.py"].replace('self.emit("rms_norm", x=x,', 'self.emit("rms_norm", x,')
    positional = {**low, "t5_ops.py": t5}
    assert any("by position" in e for e in emissions(positional)[1])


def test_a_bad_declaration_is_refused_at_build(monkeypatch):
    """setup.py's text refuses a declaration an instruction cannot hold (the build stops there)."""
    bad = [((("x", "x"), (), ()), "declared twice"), ((("x",), ("threads",), ()), "reserves"),
           ((tuple(f"p{k}" for k in range(13)), (), ()), "13 P operands")]
    for decl, said in bad:
        monkeypatch.setitem(opcodes.OPERANDS, "add", decl)
        with pytest.raises(ValueError, match=said):
            opcodes.operands_pxi_text()
    monkeypatch.delitem(opcodes.OPERANDS, "add")
    assert opcodes.declaration_errors() == ["opcode 'add' declares no operands (add it to OPERANDS)"]


def test_emit_refuses_a_missing_extra_or_misnamed_operand():
    """At lowering time, naming the opcode and the operand."""
    ok = dict(x="x", weight="g", bias="b", y="y", m=2, d=8, ldx=8, ldy=8, eps=1e-5)
    assert operand_lists("layer_norm", ok) == (["x", "g", "b", "y"], [2, 8, 8, 8], [1e-5])
    without_bias = {k: v for k, v in ok.items() if k != "bias"}
    with pytest.raises(OperandError, match=r"opcode 'layer_norm': operands missing bias \("):
        operand_lists("layer_norm", without_bias)
    with pytest.raises(OperandError, match=r"opcode 'layer_norm': operands not declared shift \("):
        operand_lists("layer_norm", {**ok, "shift": "s"})
    with pytest.raises(OperandError, match=r"'layer_norm': operands missing bias; not declared b_ias"):
        operand_lists("layer_norm", {**without_bias, "b_ias": "b"})
    with pytest.raises(OperandError, match="no opcode 'layer_norms'"):
        operand_lists("layer_norms", ok)
    assert issubclass(OperandError, TypeError)


def test_lowering_emit_and_the_vm_check_the_operands():
    """The lowering's ``emit`` adds an instruction only with the declared operands, and the VM's
    ``Program.add`` refuses counts other than the declaration's."""
    from seqjit.graph._native_vm import Program
    from seqjit.graph.lowering import Lowering

    low = Lowering.__new__(Lowering)  # only what emit reads: arrays, origin, prog
    x, g, y = np.ones((2, 8), np.float32), np.ones(8, np.float32), np.zeros((2, 8), np.float32)
    low.arrays, low.origin, low.prog = {"x": x, "g": g, "y": y}, {}, Program(0)
    named = dict(x="x", weight="g", y="y", m=2, d=8, ldx=8, ldy=8, eps=1e-6)
    with pytest.raises(OperandError, match="rms_norm.*missing ldy"):
        low.emit("rms_norm", **{k: v for k, v in named.items() if k != "ldy"})
    assert len(low.prog) == 0
    low.emit("rms_norm", **named)
    low.prog.finish([])
    low.prog.run()
    np.testing.assert_allclose(y, np.ones((2, 8)), rtol=1e-6)  # RMS norm of ones, weight ones
    prog = Program(0)
    with pytest.raises(ValueError, match=r"'rms_norm' takes 3 pointers, 4 integers and 1 floats.*got 3, 3 and 1"):
        prog.add(OP["rms_norm"], [0, 0, 0], [1, 1, 1], [1.0])
    with pytest.raises(ValueError, match="no opcode 0"):
        prog.add(0)
