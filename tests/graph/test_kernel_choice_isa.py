"""The kernel choice is keyed by the instruction-set variant the VM runs (SEQJIT_ISA or a forced
variant): a capped run never takes an uncapped run's measurement, and both stay in the cache."""
import json

import pytest

from seqjit.graph import _native_vm
from seqjit.graph import kernel_choice as kc

SHAPE = (16, 64, 96)  # a small class: measured in a few ms


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SEQJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("SEQJIT_KERNEL_CHOICE", raising=False)
    monkeypatch.setattr(kc, "EVICT_BYTES", 1 << 20)
    calls = []
    real = kc.measure
    monkeypatch.setattr(kc, "measure", lambda cls: calls.append((kc.isa(), cls)) or real(cls))
    kc.forget()
    yield tmp_path / kc.FILE, calls
    kc.forget()
    _native_vm.linear_isa(None)


def test_the_key_is_the_vms_variant():
    try:
        assert kc.isa() == _native_vm.isa() == _native_vm.linear_isa(None)
        assert _native_vm.linear_isa("base") == "base" and kc.isa() == "base"
    finally:
        _native_vm.linear_isa(None)


def test_each_variant_measures_once(cache, monkeypatch):
    path, calls = cache
    variant = ["avx2"]
    monkeypatch.setattr(kc, "isa", lambda: variant[0])
    kc.entry(*SHAPE)
    variant[0] = "base"  # as under SEQJIT_ISA=baseline: the avx2 measurement is not taken
    kc.entry(*SHAPE)
    assert [v for v, _ in calls] == ["avx2", "base"]
    kc.forget()  # a new process of either variant reads its own entry from the file
    for variant[0] in ("avx2", "base"):
        kc.entry(*SHAPE)
    assert len(calls) == 2
    assert sorted(json.loads(path.read_text())["choices"]) == sorted(
        kc.key(kc.shape_class(*SHAPE), v) for v in ("avx2", "base"))


def test_a_forced_variant_measures_under_its_own_key(cache):
    path, calls = cache
    assert _native_vm.linear_isa("base") == "base"  # every x86-64 runs it
    kc.entry(*SHAPE)
    assert calls == [("base", kc.shape_class(*SHAPE))]
    assert kc.key(kc.shape_class(*SHAPE), "base") in json.loads(path.read_text())["choices"]


def test_inspect_kernels_names_the_isa(cache, monkeypatch, capsys):
    from seqjit.cli import main
    from seqjit.kernels import _isa

    monkeypatch.setattr(kc, "SHOWN", [])
    assert main(["inspect", "--kernels"]) == 0
    head, families = capsys.readouterr().out.splitlines()[:2]
    assert head.endswith(f"; ISA {kc.isa()})")
    assert families.split()[3:] == [f"native_vm={kc.isa()}", *(f"{f}={v}" for f, v in _isa.by_family().items())]
