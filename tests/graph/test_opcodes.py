"""The native VM's opcode list and the lowering's agree, as ggml checks ``GGML_OP_COUNT``: every opcode
of ``native_ops.OP`` is in the VM's ``cdef enum`` (``src/seqjit/graph/_native_vm.pyx``) under the same
number, the VM has one more (``OP_PYCALL``, its own), the VM's run loop has a branch for each, and the
lowering emits each. Adding an opcode is two lines (the enum entry and the ``OP`` entry) plus its
branch and its lowering; a half-added one fails here. Read from the sources, so nothing is built."""
import re
from pathlib import Path

from seqjit.graph.native_ops import OP

GRAPH = Path(__file__).resolve().parents[2] / "src" / "seqjit" / "graph"
VM = (GRAPH / "_native_vm.pyx").read_text(encoding="utf-8")
LOWERING = "\n".join(p.read_text(encoding="utf-8") for p in [GRAPH / "native_ops.py", GRAPH / "lowering.py", *sorted((GRAPH / "ops").glob("*.py"))])
#: opcodes the VM defines for itself (never lowered from a graph op)
VM_ONLY = {"OP_PYCALL"}


def vm_opcodes() -> dict:
    """``OP_*`` name -> number, from the VM's ``cdef enum`` blocks."""
    found = {}
    for block in re.findall(r"^cdef enum:\n((?:[ \t]+.*\n)+)", VM, flags=re.M):
        found.update({name: int(value) for name, value in re.findall(r"^\s+(OP_\w+)\s*=\s*(\d+)", block, flags=re.M)})
    return found


def test_the_vm_enum_and_the_op_table_hold_the_same_opcodes():
    vm = vm_opcodes()
    assert len(vm) == len(OP) + len(VM_ONLY), (sorted(vm), sorted(OP))
    assert {f"OP_{name.upper()}": code for name, code in OP.items()} == {n: c for n, c in vm.items() if n not in VM_ONLY}
    assert len(set(vm.values())) == len(vm), "two opcodes share a number"


def test_every_opcode_is_run_by_the_vm_and_emitted_by_the_lowering():
    for name in vm_opcodes():
        assert re.search(rf"\bc\.op == {name}\b", VM), f"the VM's run loop has no branch for {name}"
    for name in OP:
        assert re.search(rf"""(emit\(|OP\[)["']{name}["']""", LOWERING), f"no lowering emits opcode {name!r}"


def test_the_check_sees_a_half_added_opcode(monkeypatch):
    """Guards the guard: an opcode in the table only fails the count."""
    monkeypatch.setitem(OP, "t5_bias", max(OP.values()) + 1)
    vm = vm_opcodes()
    assert len(vm) != len(OP) + len(VM_ONLY)
