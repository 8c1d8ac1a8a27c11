# watchkeeper — the two commands the README starts with are `make quickstart` and `make test`.
VENV   ?= .venv
PYTHON ?= python3
BIN    := $(VENV)/bin
WK     := $(BIN)/watchkeeper

QUICKSTART_PROFILES ?= qwen-baseline,qwen-draft4,qwen-ngram

.PHONY: help venv setup quickstart gpu-check bench test test-fast test-clock lint typecheck unit prebuild postgres faketime ccache clean

help:
	@echo "make quickstart  venv + llama-server build + Qwen models, then the paired bench"
	@echo "make test        lint, type-check, the full test suite (real llama-server, Postgres, SQLite) and test-clock"
	@echo "make test-fast   lint + every test that needs no llama-server (pytest -m 'not server')"
	@echo "make test-clock  the scheduling and digest unit tests under three faked clocks (faketime)"
	@echo "make setup       only the venv, the llama-server build and the SmolLM2 test model"
	@echo "make gpu-check   on a GPU host: CUDA build + short SmolLM2 bench; offload, VRAM, energy, speed-ups, identity (ARGS=--dry-run: the plan)"

# A host where nvidia-smi lists a GPU gets the `gpu` extra (nvidia-ml-py: NVML's binding, for
# VRAM, power and energy) with the venv; `make gpu-check` adds it to a venv made without it.
# Offline: `make venv PIP_NO_INDEX=1 PIP_FIND_LINKS=/path/to/bundle/wheels` (README, GPU hosts).
comma    := ,
HAS_GPU  := $(shell nvidia-smi -L 2>/dev/null | grep -q '^GPU' && echo yes)
EXTRAS   := dev$(if $(HAS_GPU),$(comma)gpu)

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip || true
	$(BIN)/pip install --quiet -e '.[$(EXTRAS)]'
	touch $@

setup: venv ccache
	$(WK) setup

# nvcc and a GPU: the CUDA build (examples/quickstart-gpu.toml); a GPU without nvcc: one line how.
HAS_NVCC := $(shell command -v nvcc >/dev/null 2>&1 && echo yes)
QS_CUDA  := $(if $(and $(HAS_GPU),$(HAS_NVCC)),--config examples/quickstart-gpu.toml,)

quickstart: venv ccache
	@$(if $(QS_CUDA),echo "quickstart: nvcc and a GPU found: the CUDA llama-server (examples/quickstart-gpu.toml)",$(if $(HAS_GPU),echo "quickstart: a GPU but no nvcc on PATH: building the CPU server; install the CUDA toolkit (nvcc) and rerun for the CUDA one",true))
	$(WK) setup $(if $(QS_CUDA),--cuda,) $(QS_CUDA) --profile qwen-baseline --profile qwen-draft4 --profile qwen-ngram
	$(WK) bench $(QS_CUDA) --profiles $(QUICKSTART_PROFILES) --per-category 1

# The GPU path's own check (watchkeeper gpu-check): refuses in one line on a host without a GPU;
# `make gpu-check ARGS=--dry-run` prints the plan anywhere.
gpu-check: venv
	@$(if $(HAS_GPU),$(BIN)/python -c 'import pynvml' 2>/dev/null || $(BIN)/pip install --quiet 'nvidia-ml-py' || true,true)
	$(WK) gpu-check $(ARGS)

bench: quickstart

postgres:
	bash scripts/ensure-postgres.sh

faketime:
	bash scripts/ensure-faketime.sh

ccache:
	bash scripts/ensure-ccache.sh

lint: venv
	$(BIN)/ruff check watchkeeper tests migrations benchmarks
	$(BIN)/ruff format --check watchkeeper tests migrations benchmarks

typecheck: venv
	$(BIN)/mypy

# The builds (the configured llama.cpp release and its predecessor) and SmolLM2 are made
# before pytest starts, outside every test's timeout: on a bare machine the first build takes
# 7-14 minutes (tests/support/prebuild.py; cached, a second).
prebuild: venv ccache
	PYTHONPATH=tests $(BIN)/python -m support.prebuild

# The 15 slowest tests close every run, so drift in the suite's cost shows in every CI log.
unit: venv postgres ccache prebuild
	$(BIN)/pytest -q --durations=15

# The clock-dependent unit tests under faked clocks: a month/year-end minute, and both
# Europe/Berlin DST changes (a skipped hour in March, a repeated one in October).
CLOCK_TESTS ?= tests/daemon/test_daemon_units.py tests/nightly/test_digest.py
test-clock: venv postgres faketime
	faketime '2026-11-30 23:58:00' $(BIN)/pytest -q -p no:cacheprovider $(CLOCK_TESTS)
	TZ=Europe/Berlin faketime '2026-03-29 01:59:00' $(BIN)/pytest -q -p no:cacheprovider $(CLOCK_TESTS)
	TZ=Europe/Berlin faketime '2026-10-25 02:30:00' $(BIN)/pytest -q -p no:cacheprovider $(CLOCK_TESTS)

# Two workers: these tests wait on subprocesses and sockets more than on the CPU. The full
# suite stays serial: llama-server tests measure speed and must not share the cores.
test-fast: lint postgres
	$(BIN)/pytest -q -n 2 -m "not server"

test: lint typecheck unit test-clock

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
