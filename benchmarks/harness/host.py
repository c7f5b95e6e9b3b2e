"""The host a table was measured on: CPU model, core count, L2 and L3 sizes, load."""
from __future__ import annotations

import os
import subprocess


def lscpu() -> dict:
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        text = ""
    return {k.strip(): v.strip() for k, v in (ln.split(":", 1) for ln in text.splitlines() if ":" in ln)}


#: AMD family 25 (19h) models by generation: a VM often reports only "AMD EPYC" as the model name
ZEN = {range(0x00, 0x10): "Zen 3", range(0x10, 0x20): "Zen 4", range(0x20, 0x30): "Zen 3",
       range(0x40, 0x50): "Zen 3+", range(0x50, 0x60): "Zen 3", range(0x60, 0x80): "Zen 4",
       range(0xA0, 0xB0): "Zen 4c"}


def isa_flags() -> str:
    """The vector extensions the kernels care about, from /proc/cpuinfo ("avx2 fma avx512f ...")."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            flags = next((ln.split(":", 1)[1].split() for ln in f if ln.startswith("flags")), [])
    except OSError:
        return "?"
    wanted = ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_bf16")
    return " ".join(w for w in wanted if w in flags) or "baseline"


def cpu() -> dict:
    """``{"model", "cpus", "l2", "l3", "isa"}`` (lscpu's words: "1 MiB (2 instances)"; "?" when unknown);
    the model names the vendor's family and model numbers (and AMD's generation) when lscpu gives them."""
    fields = lscpu()
    model = fields.get("Model name", "?")
    family, number = fields.get("CPU family", ""), fields.get("Model", "")
    if family.isdigit() and number.isdigit():
        gen = (next((g for r, g in ZEN.items() if int(number) in r), None) if family == "25"
               else "Zen 5" if family == "26" else None)
        model += f" (family {family} model {number}" + (f", {gen})" if gen else ")")
    return {"model": model, "cpus": os.cpu_count(), "isa": isa_flags(),
            "l2": fields.get("L2 cache", "?"), "l3": fields.get("L3 cache", "?")}


def describe(info: dict | None = None) -> str:
    """One line for a table's heading: ``AMD EPYC, 2 CPUs, L2 1 MiB (2 instances), L3 32 MiB (1 instance)``."""
    c = info or cpu()
    isa = f" [{c['isa']}]" if c.get("isa") else ""
    return f"{c['model']}{isa}, {c['cpus']} CPUs, L2 {c['l2']}, L3 {c['l3']}"


def load() -> float:
    return os.getloadavg()[0]
