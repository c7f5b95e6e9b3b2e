"""First call at a new batch shape against the same call warm (issue 20): the G2P-sized GRU seq2seq of
small_workload.py, 1,024 words decoded in batches of 256, one thread, each run in a fresh process.

    python benchmarks/decoding/first_call.py [--runs 3]

The model is saved once as a seqjit directory (built with torch in a separate process), so the timed
process imports no torch: it loads the model (``seqjit.load``, which prepares it: the native VM's
import and the weight copies its kernels read), then times the first ``generate`` and five more.
Prints load time, first call, the median warm call and their ratio (wall and CPU time). The children
run with bytecode caching on (PYTHONDONTWRITEBYTECODE removed; one untimed process first writes the
.pyc files), as an installed package has them: compiling the decoding modules from source would
otherwise count as first-call time.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import small_workload as w  # noqa: E402

CHILD = r"""
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import seqjit
seqjit.set_num_threads(1)
model = seqjit.load(sys.argv[1])
load = (time.perf_counter() - t0, time.process_time() - c0)
words = json.loads(sys.argv[2])
times = []
for _ in range(6):
    t, c = time.perf_counter(), time.process_time()
    model.generate(words, max_length=8, min_length=8, max_batch_size=256)
    times.append((time.perf_counter() - t, time.process_time() - c))
print(json.dumps({"load": load, "calls": times}))
"""


def model_dir() -> Path:
    path = w.cache_dir() / "gru-seqjit"
    if not (path / "model.safetensors").exists():
        code = ("import sys; sys.path.insert(0, %r); import small_workload as w, seqjit; "
                "seqjit.from_torch(w.gru_weights(), arch='rnn_seq2seq', pad_id=w.PAD, eos_id=w.EOS, "
                "decoder_start_id=w.SOS).save(%r)" % (str(HERE), str(path)))
        subprocess.run([sys.executable, "-c", code], check=True)
    return path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=3, help="fresh processes")
    args = p.parse_args(argv)
    path, words = model_dir(), json.dumps(w.words(1024))
    print("| run | load ms | first call ms (cpu) | warm median ms (cpu) | first / warm (wall, cpu) |")
    print("|---:|---:|---:|---:|---:|")
    ratios = []
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-c", CHILD, str(path), words], check=True, capture_output=True, env=env)
    for run in range(args.runs):
        out = subprocess.run([sys.executable, "-c", CHILD, str(path), words], check=True, capture_output=True,
                             text=True, env=env).stdout
        r = json.loads(out.strip().splitlines()[-1])
        first, warm = r["calls"][0], r["calls"][1:]
        wall, cpu = statistics.median(t for t, _ in warm), statistics.median(c for _, c in warm)
        ratios.append(first[0] / wall)
        print(f"| {run + 1} | {1e3 * r['load'][0]:.0f} | {1e3 * first[0]:.0f} ({1e3 * first[1]:.0f}) | "
              f"{1e3 * wall:.0f} ({1e3 * cpu:.0f}) | {first[0] / wall:.2f}x, {first[1] / cpu:.2f}x |")
    print(f"\nmedian first / warm (wall): {statistics.median(ratios):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
