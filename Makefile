# Convenience targets; the README's two Quickstart commands work without make.
PY ?= python3

.PHONY: install dev test test-all test-hf4 test-toolkits bench bench-smoke demo g2p-train g2p-eval clean

install:            ## install seqjit (builds the Cython kernels)
	$(PY) -m pip install .

dev:                ## editable install with test extras
	$(PY) -m pip install --no-build-isolation -e '.[test]'

test:               ## the CI test run (same as .ci/run)
	bash .ci/run

test-all:           ## including the slow, real-size model tests (not the toolkit ones: make test-toolkits)
	$(PY) -m pytest -q -m "not toolkit and not hf4"

test-hf4:           ## group beam search against transformers 4.x's own, in a cached venv of its own
	bash .ci/hf4

test-toolkits:      ## against OpenNMT-py 3.5.1's, JoeyNMT 2.3.0's and Keras' own code, in a cached venv of their own
	bash .ci/toolkits

# what `make bench` runs, and nothing else (docs/benchmarks.md lists the other scripts and kernel labs)
BENCH_PYTEST ?= benchmarks/test_bench_attention.py benchmarks/test_bench_g2p.py benchmarks/test_bench_linear_int8.py \
	benchmarks/test_bench_nn_ops.py benchmarks/test_bench_rnn.py benchmarks/decoding/test_bench_generate.py \
	benchmarks/decoding/test_bench_small.py
BENCH_WORKLOADS ?= small,marian
BENCH_OUT ?= build/bench

bench:              ## the pytest-benchmark files of BENCH_PYTEST, then the harness's BENCH_WORKLOADS (tables in BENCH_OUT)
	@echo "== make bench: pytest-benchmark over $(words $(BENCH_PYTEST)) files: $(BENCH_PYTEST)"
	$(PY) -m pytest $(BENCH_PYTEST) --benchmark-enable --benchmark-only -q --benchmark-columns=median,iqr,rounds --benchmark-sort=name
	@echo "== make bench: the harness's workloads $(BENCH_WORKLOADS) -> $(BENCH_OUT)/harness.md, harness.json"
	$(PY) -m benchmarks.harness --workload $(BENCH_WORKLOADS) --md $(BENCH_OUT)/harness.md --json $(BENCH_OUT)/harness.json

bench-smoke:        ## the harness's smoke mode: the tiny Transformer and the GRU, every engine once, seconds
	$(PY) -m benchmarks.harness --workload tiny-greedy,gru --smoke

demo:               ## the bundled G2P models side by side
	$(PY) -m seqjit demo

g2p-train:          ## retrain the three G2P models from scratch (stage 1; benchmarks/RESULTS.md: the later stages; train extra)
	$(PY) benchmarks/g2p/training/train.py

g2p-eval:           ## test-set PER/WER and WER by word length (table + PNG in benchmarks/results/)
	$(PY) benchmarks/g2p/wer_by_length.py

clean:
	rm -rf build dist *.egg-info kernels/*/cython_cpu.c kernels/*/cython_cpu.*.so
	find . -name __pycache__ -prune -exec rm -rf {} +
