"""The native VM's opcodes: the one list both sides read.

An opcode's number is its position here (from 1). The lowering (:mod:`seqjit.graph.native_ops`'s
``OP``) numbers instructions from this list, and ``setup.py`` writes the VM's ``cdef enum`` from it
into ``_opcodes.pxi`` (``OP_<NAME>`` and ``OP_COUNT``, as ggml's ``GGML_OP_COUNT``) before building
``_native_vm.pyx``; the built VM refuses to load when the list it was built from is not this one
(a stale build). setup.py also writes the VM's dispatch there: opcode ``x`` runs
``run_x(c, nt, team, err)``, an inline function in its kernel family's ``_native.pxi`` (or, for the
VM's own data movement, in ``graph/_vm_ops.pxi``; signature in ``graph/_instr.pxi``), so the VM's run
loop is never edited for a new opcode. ``tests/graph/test_opcodes.py`` checks that every opcode has
its ``run_`` function and that some lowering emits it.

Each opcode also declares its operands by name (:data:`OPERANDS`): the pointers, integers and floats
of its instruction, in order. setup.py writes from them ``_operands.pxi`` (a build output, not in git):
one index constant per operand, ``<OPCODE>_<P|I|F>_<NAME>`` (``LAYER_NORM_P_X = 0``), which the
``run_`` functions read (``c.p[LAYER_NORM_P_X]``) instead of bare positions, and the lowering's ``emit``
(:mod:`seqjit.graph.native_ops`) takes the operands by these names, refusing a missing, extra or
misnamed one. docs/native_vm.md shows how to add an opcode.

This module is plain data (setup.py runs it without importing seqjit): append a new opcode at the end.
"""

OPCODES = ("linear", "layer_norm", "add", "embedding", "copy", "position_at", "kv_write", "step_lengths",
           "attention", "act", "gru_cell", "lstm_cell", "additive", "select_first", "pycall", "rnn_sequence",
           "linear_int8", "embedding_int8", "rnn_int8", "rms_norm", "mul", "relative_bias",
           "linear_half", "embedding_half")
#: opcodes the VM emits for itself (``Program.add_callback``), never a lowering
VM_ONLY = ("pycall",)
#: opcodes whose products the team of two takes when a run of two threads holds it (nt = TEAM; the
#: others then run on the calling thread), whatever their plan said
TEAM = ("linear", "gru_cell", "lstm_cell", "rnn_sequence", "additive", "linear_int8", "linear_half")
#: of TEAM, those that decide per instruction: their family defines ``team_<name>(Instr* c)``
TEAM_IF = ("linear_int8",)
#: opcode name -> number
OP = {name: code for code, name in enumerate(OPCODES, 1)}


def _operands(p: str = "", i: str = "", f: str = "") -> tuple:
    """(pointers, integers, floats): each a tuple of operand names, from space-separated names."""
    return tuple(p.split()), tuple(i.split()), tuple(f.split())


#: opcode name -> (pointer names, integer names, float names), in instruction order. A pointer is a
#: value, an array of the lowering, or NULL (None); integers are shapes, strides in elements, flags
#: and codes. Names are unique within an opcode (``emit`` takes them as keywords), and at most
#: _instr.pxi's NPTR / NINT / NFLT of each kind.
OPERANDS = {
    "linear": _operands(p="x w bias y", i="m k n ldx ldy act layout"),
    "layer_norm": _operands(p="x weight bias y", i="m d ldx ldy", f="eps"),
    "add": _operands(p="a b y", i="n"),
    "embedding": _operands(p="ids table positions y", i="n d length vocab", f="scale"),
    "copy": _operands(p="src dst", i="shape0 shape1 shape2 shape3 src_stride0 src_stride1 src_stride2 src_stride3 "
                                    "dst_stride0 dst_stride1 dst_stride2 dst_stride3 itemsize"),
    "position_at": _operands(p="table step y", i="d offset rows"),
    "kv_write": _operands(p="cache x step", i="b h t d x_sb x_sh"),
    "step_lengths": _operands(p="step y", i="n"),
    "attention": _operands(p="q k v lengths o scores bias",
                           i="b h lq lk d dv causal qb qh ql kb kh kl vb vh vl ob oh ol bb bh bl", f="scale"),
    "act": _operands(p="x y", i="n act"),
    "gru_cell": _operands(p="x h w_ih w_hh b_ih b_hh out scratch pre",
                          i="batch input_size hidden ldx ldh ldo layout"),
    "lstm_cell": _operands(p="x h c w_ih w_hh b_ih b_hh h_out c_out scratch pre",
                           i="batch input_size hidden ldx ldh ldc layout"),
    "additive": _operands(p="query keys_proj keys w_q v lengths context weights scratch",
                          i="batch s a dq dk ldq layout"),
    "select_first": _operands(p="step first rest y", i="nbytes"),
    "pycall": _operands(i="callback"),
    "rnn_sequence": _operands(p="x h0 c0 lengths wtab out h_n c_n scratch ptab",
                              i="lstm rb rt ldx input_size ldo batch steps hidden layers dirs layout finite_hh"),
    "linear_int8": _operands(p="x w scale bias y qx xsum xs", i="m k n ldx ldy act"),
    "embedding_int8": _operands(p="ids table positions y row_scale", i="n d length vocab", f="scale"),
    "rnn_int8": _operands(p="xg h0 c0 lengths w scale bias out h_n c_n scratch qh",
                          i="lstm batch steps hidden ldx reverse"),
    "rms_norm": _operands(p="x weight y", i="m d ldx ldy", f="eps"),
    "mul": _operands(p="a b y", i="n"),
    "relative_bias": _operands(p="table buckets step y", i="heads below lq lk has_step"),
    "linear_half": _operands(p="x w bias y xq", i="m k n ldx ldy act fmt arith"),
    "embedding_half": _operands(p="ids table positions y", i="n d length vocab fmt", f="scale"),
}
#: what an instruction holds of each kind at most (_instr.pxi's NPTR, NINT, NFLT)
LIMITS = (12, 24, 4)
#: names ``emit`` takes for itself, so no operand may have them
RESERVED = ("op", "threads", "keep")
KINDS = ("P", "I", "F")


def operand_constant(op: str, kind: int, name: str) -> str:
    """The index constant the ``run_`` functions read for operand ``name`` (``kind`` 0 pointer, 1
    integer, 2 float) of opcode ``op``: ``LAYER_NORM_P_X``."""
    return f"{op.upper()}_{KINDS[kind]}_{name.upper()}"


def declaration_errors() -> list:
    """What is wrong with :data:`OPERANDS` (empty when nothing): an opcode without a declaration or a
    declaration without an opcode, a repeated or reserved name, more operands than an instruction holds."""
    errors = [f"opcode {op!r} declares no operands (add it to OPERANDS)" for op in OPCODES if op not in OPERANDS]
    errors += [f"OPERANDS declares {op!r}, which is not in OPCODES" for op in OPERANDS if op not in OPCODES]
    for op, kinds in OPERANDS.items():
        names = [name for group in kinds for name in group]
        errors += [f"opcode {op!r}: operand {name!r} is declared twice" for name in sorted(set(names))
                   if names.count(name) > 1]
        errors += [f"opcode {op!r}: operand {name!r} is a name emit reserves" for name in names if name in RESERVED]
        errors += [f"opcode {op!r}: operand {name!r} is not an identifier" for name in names
                   if not name.isidentifier() or name != name.lower()]
        errors += [f"opcode {op!r}: {len(group)} {KINDS[k]} operands, an instruction holds {LIMITS[k]}"
                   for k, group in enumerate(kinds) if len(group) > LIMITS[k]]
    return errors


def operands_pxi_text() -> str:
    """The text of ``_operands.pxi``: the index constant of every operand of :data:`OPERANDS`, and the
    declarations themselves (``BUILT_OPERANDS``, checked at import like ``BUILT_OPCODES``). Raises
    ValueError for a declaration :func:`declaration_errors` refuses, so the build stops there."""
    errors = declaration_errors()
    if errors:
        raise ValueError("seqjit.graph.opcodes.OPERANDS: " + "; ".join(errors))
    lines = []
    for op in OPCODES:
        for kind, names in enumerate(OPERANDS[op]):
            lines += [f"    {operand_constant(op, kind, name)} = {k}\n" for k, name in enumerate(names)]
    return ("# Generated by setup.py from src/seqjit/graph/opcodes.py: do not edit (edit OPERANDS there).\n"
            "# The index of each operand in its instruction's p[], i[] or f[] (docs/native_vm.md).\n"
            "cdef enum:\n" + "".join(lines) + "\n"
            "#: the operand declarations this VM was built from (checked against seqjit.graph.opcodes at import)\n"
            f"BUILT_OPERANDS = {OPERANDS!r}\n")


def pxi_text() -> str:
    """The text of ``_opcodes.pxi``: the VM's enum, its dispatch and its team policy, generated from
    :data:`OPCODES`, :data:`VM_ONLY`, :data:`TEAM` and :data:`TEAM_IF`."""
    enum = "".join(f"    OP_{name.upper()} = {code}\n" for name, code in OP.items())
    team = "\n            or ".join(f"(c.op == OP_{name.upper()} and team_{name}(c))" if name in TEAM_IF
                                    else f"c.op == OP_{name.upper()}" for name in TEAM)
    branches = "".join(f"    {'if' if k == 0 else 'elif'} c.op == OP_{name.upper()}:\n"
                       f"        return run_{name}(c, nt, team, err)\n"
                       for k, name in enumerate(n for n in OPCODES if n not in VM_ONLY))
    return ("# Generated by setup.py from src/seqjit/graph/opcodes.py: do not edit (edit OPCODES there).\n"
            "cdef enum:\n" + enum + f"    OP_COUNT = {len(OPCODES)}\n\n"
            "#: the opcode list this VM was built from (checked against seqjit.graph.opcodes at import)\n"
            f"BUILT_OPCODES = {OPCODES!r}\n\n\n"
            "cdef inline bint takes_team(Instr* c) noexcept nogil:\n"
            '    """Whether the team of two runs this instruction when a run of two threads holds it."""\n'
            f"    return ({team})\n\n\n"
            "cdef inline int dispatch(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:\n"
            '    """Run instruction ``c`` (any but the VM\'s own OP_PYCALL) through its run_<opcode>."""\n'
            + branches + "    return ERR_NONE\n")
