# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: demo test lint types unit bench bench-large clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test,embed,langgraph,mcp,postgres,ui]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

lint: $(STAMP)
	$(BIN)/ruff check mnemosyne cli tests bench examples
	$(BIN)/ruff format --check mnemosyne cli
	$(BIN)/lint-imports

types: $(STAMP)
	$(BIN)/mypy mnemosyne cli

# The tests start a PostgreSQL server of their own: its binaries must be installed.
unit: $(STAMP)
	dpkg -s postgresql-15 >/dev/null 2>&1 || (apt-get update && apt-get install -y --no-install-recommends postgresql-15)
	command -v chromium >/dev/null || (apt-get update && apt-get install -y --no-install-recommends chromium)
	$(BIN)/pytest -n 2 --dist loadfile  # both cores; a file's tests share one worker (and its fixtures)

test: lint types unit

bench: $(STAMP)
	$(BIN)/python bench/run.py --out bench/results.md

# A million memories beside 100k, in one run (~2 minutes, ~3 GB of disk in /tmp).
bench-large: $(STAMP)
	$(BIN)/python bench/large.py --out bench/results-large.md

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
