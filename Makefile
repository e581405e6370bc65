# stronger-mas: the two commands are `make main` (the main job) and `make test` (the test suite).
VENV ?= .venv
PY := $(VENV)/bin/python
VENV_VLLM ?= .venv-vllm
export HF_HUB_OFFLINE := 1
export HF_HUB_DISABLE_TELEMETRY := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup main demo test test-fast bench setup-vllm test-vllm bench-vllm

setup:
	@bash scripts/setup.sh

main: setup  ## the main job: train, evaluate, submit, build the leaderboard page
	$(PY) -m baselines.main_job

demo: setup  ## play every env with its scripted (optimal) policy
	$(PY) -m mas_envs.demo

test: setup  ## the whole test suite
	$(PY) -m pytest -q

test-fast: setup
	$(PY) -m pytest -q -m "not slow"

bench: setup  ## the quick benchmarks (see docs/PERFORMANCE.md for all of them)
	$(PY) bench/bench_envs.py
	$(PY) bench/bench_sandbox.py

setup-vllm:  ## a separate venv with vLLM (CPU build) for the vllm generation backend (docs/VLLM.md)
	@VENV_VLLM=$(VENV_VLLM) bash scripts/setup_vllm.sh

test-vllm: setup-vllm  ## only the vLLM backend tests, in that venv (the project is used from this folder)
	OMP_NUM_THREADS=1 PYTHONPATH=. $(VENV_VLLM)/bin/python -m pytest -q tests/test_vllm_backend.py

bench-vllm: setup-vllm  ## HF generate vs prefix-shared vs vLLM, side by side (docs/VLLM.md)
	PYTHONPATH=. $(VENV_VLLM)/bin/python bench/bench_vllm.py
