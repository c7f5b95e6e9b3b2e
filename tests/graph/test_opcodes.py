"""One opcode list, as ggml checks ``GGML_OP_COUNT``: the VM's ``cdef enum`` and dispatch are generated
from ``seqjit.graph.opcodes.OPCODES`` (``setup.py`` writes ``_opcodes.pxi``), the lowering numbers its
instructions from the same list, each opcode's ``run_<opcode>`` (which the dispatch calls) is defined in
its kernel family's ``_native.pxi`` (or the VM's ``_vm_ops.pxi``), and some op's native lowering
(``OpDef.native``, beside the op in ``seqjit/graph/ops/``) or the lowering's own services emit each. A
half-added opcode (listed but never run, or never emitted) fails here. Read from the sources (and the
list), so nothing is built; the built VM checks its own list at import.
"""
import re
from pathlib import Path

from seqjit.graph import opcodes
from seqjit.graph.native_ops import OP
from seqjit.graph.ops import OPS

ROOT = Path(__file__).resolve().parents[2]
GRAPH = ROOT / "src" / "seqjit" / "graph"
VM = (GRAPH / "_native_vm.pyx").read_text(encoding="utf-8")
#: where run_<opcode> functions live: the kernel families' pxi files and the VM's own ops
RUN_FILES = [GRAPH / "_vm_ops.pxi", *sorted((ROOT / "kernels").glob("*/*.pxi"))]
LOWERING_FILES = [GRAPH / "native_ops.py", GRAPH / "lowering.py", *sorted((GRAPH / "ops").glob("*.py"))]


def lowering_sources() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in LOWERING_FILES)


def run_sources() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in RUN_FILES)


def missing(runs: str, lowering: str, op_table: dict) -> list:
    """What a half-added opcode lacks: (opcode, "run" or "lowering") pairs (``run``: its
    ``run_<opcode>`` with the dispatch's signature)."""
    gaps = []
    for name in op_table:
        signature = (rf"^cdef inline int run_{name}\(Instr\* c, int nt, bint team, Py_ssize_t\* err\) "
                     r"noexcept nogil:")
        if name not in opcodes.VM_ONLY and not re.search(signature, runs, flags=re.M):
            gaps.append((name, "run"))
        if name not in opcodes.VM_ONLY and not re.search(rf"""(emit\(|OP\[)["']{name}["']""", lowering):
            gaps.append((name, "lowering"))
    return gaps


def test_the_generated_enum_is_the_list():
    """``_opcodes.pxi`` is what setup.py writes from the list now (a list edited without a build fails)."""
    assert (GRAPH / "_opcodes.pxi").read_text(encoding="utf-8") == opcodes.pxi_text()
    assert 'include "_opcodes.pxi"' in VM
    assert not re.search(r"^\s+OP_\w+\s*=\s*\d+", VM, flags=re.M), "an opcode numbered by hand in the VM"
    assert not re.search(r"\bc\.op == OP_(?!PYCALL)", VM), "an opcode dispatched by hand in the VM"
    assert set(opcodes.TEAM_IF) <= set(opcodes.TEAM) <= set(opcodes.OPCODES)
    assert OP is opcodes.OP and len(OP) == len(opcodes.OPCODES) == len(set(opcodes.OPCODES))


def test_the_built_vm_holds_the_same_list():
    """A VM built from another list refuses to load (ImportError, naming the rebuild), so this fails too."""
    from seqjit.graph import _native_vm

    assert tuple(_native_vm.BUILT_OPCODES) == opcodes.OPCODES


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
    without_rms = re.sub(r"""emit\(["']rms_norm["']""", "emit(name", lowering_sources())
    assert missing(run_sources(), without_rms, OP) == [("rms_norm", "lowering")]
    without_run = run_sources().replace("cdef inline int run_mul(", "cdef inline int run_mul_(")
    assert missing(without_run, lowering_sources(), OP) == [("mul", "run")]
