# Convenience targets; the README's two Quickstart commands work without make.
PY ?= python3

.PHONY: install dev test test-all test-toolkits bench demo g2p-train g2p-eval clean

install:            ## install seqjit (builds the Cython kernels)
	$(PY) -m pip install .

dev:                ## editable install with test extras
	$(PY) -m pip install --no-build-isolation -e '.[test]'

test:               ## the CI test run (same as .ci/run)
	bash .ci/run

test-all:           ## including the slow, real-size model tests (not the toolkit ones: make test-toolkits)
	$(PY) -m pytest -q -m "not toolkit"

test-toolkits:      ## against OpenNMT-py 3.5.1's, JoeyNMT 2.3.0's and Keras' own code, in a cached venv of their own
	bash .ci/toolkits

bench:              ## every benchmark, peers in the same run
	$(PY) -m pytest benchmarks --benchmark-enable --benchmark-only -q --benchmark-columns=median,iqr,rounds --benchmark-sort=name

demo:               ## the bundled G2P models side by side
	$(PY) -m seqjit demo

g2p-train:          ## retrain the three G2P models from scratch (stage 1; benchmarks/RESULTS.md: the later stages; train extra)
	$(PY) benchmarks/g2p/training/train.py

g2p-eval:           ## test-set PER/WER and WER by word length (table + PNG in benchmarks/results/)
	$(PY) benchmarks/g2p/wer_by_length.py

clean:
	rm -rf build dist *.egg-info kernels/*/cython_cpu.c kernels/*/cython_cpu.*.so
	find . -name __pycache__ -prune -exec rm -rf {} +
