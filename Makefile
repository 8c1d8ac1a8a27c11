# watchkeeper — the two commands the README starts with are `make quickstart` and `make test`.
VENV   ?= .venv
PYTHON ?= python3
BIN    := $(VENV)/bin
WK     := $(BIN)/watchkeeper

QUICKSTART_PROFILES ?= qwen-baseline,qwen-draft4,qwen-ngram

.PHONY: help venv setup quickstart bench test lint typecheck unit postgres clean

help:
	@echo "make quickstart  venv + llama-server build + Qwen models, then the paired bench"
	@echo "make test        lint, type-check and the full test suite (real llama-server, Postgres, SQLite)"
	@echo "make setup       only the venv, the llama-server build and the SmolLM2 test model"

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

setup: venv
	$(WK) setup

quickstart: venv
	$(WK) setup --profile qwen-baseline --profile qwen-draft4 --profile qwen-ngram
	$(WK) bench --profiles $(QUICKSTART_PROFILES) --per-category 1

bench: quickstart

postgres:
	bash scripts/ensure-postgres.sh

lint: venv
	$(BIN)/ruff check watchkeeper tests migrations benchmarks
	$(BIN)/ruff format --check watchkeeper tests migrations benchmarks

typecheck: venv
	$(BIN)/mypy

unit: venv postgres
	$(BIN)/pytest -q

test: lint typecheck unit

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
