# Convenience targets; the README's two Quickstart commands work without make.
PY ?= python3

.PHONY: install dev test test-all bench demo clean

install:            ## install seqjit (builds the Cython kernels)
	$(PY) -m pip install .

dev:                ## editable install with test extras
	$(PY) -m pip install --no-build-isolation -e '.[test]'

test:               ## the CI test run (same as .ci/run)
	bash .ci/run

test-all:           ## including the slow, real-size model tests
	$(PY) -m pytest -q

bench:              ## every benchmark, peers in the same run
	$(PY) -m pytest benchmarks --benchmark-enable --benchmark-only -q --benchmark-columns=median,iqr,rounds --benchmark-sort=name

demo:
	$(PY) -m seqjit demo

clean:
	rm -rf build dist *.egg-info kernels/*/cython_cpu.c kernels/*/cython_cpu.*.so
	find . -name __pycache__ -prune -exec rm -rf {} +
