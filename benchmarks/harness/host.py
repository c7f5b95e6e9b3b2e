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


def cpu() -> dict:
    """``{"model", "cpus", "l2", "l3"}`` (lscpu's words: "1 MiB (2 instances)"; "?" when unknown)."""
    fields = lscpu()
    return {"model": fields.get("Model name", "?"), "cpus": os.cpu_count(),
            "l2": fields.get("L2 cache", "?"), "l3": fields.get("L3 cache", "?")}


def describe(info: dict | None = None) -> str:
    """One line for a table's heading: ``AMD EPYC, 2 CPUs, L2 1 MiB (2 instances), L3 32 MiB (1 instance)``."""
    c = info or cpu()
    return f"{c['model']}, {c['cpus']} CPUs, L2 {c['l2']}, L3 {c['l3']}"


def load() -> float:
    return os.getloadavg()[0]
