# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: demo test lint types ts unit unit-fast bench bench-large bench-quality clean

# pytest keeps the assertion rewriting of the test modules (and of the plugins it loads)
# as bytecode in __pycache__/ (ignored by git); where PYTHONDONTWRITEBYTECODE is set it
# would redo it in every worker on every run (~7 s of the ~12 s a worker spends collecting).
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/pytest

EXTRAS := .[test,embed,langgraph,mcp,postgres,ui,serve,client,s3,otel]

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# uv resolves the same versions as pip and fetches them in parallel: on a machine with no
# download cache the install takes ~6 s instead of ~46 s. Where no uv wheel exists, pip does it.
$(STAMP): $(BIN)/python pyproject.toml
	($(BIN)/python -m pip install --quiet --disable-pip-version-check --only-binary=:all: uv \
	  && $(BIN)/uv pip install --quiet --python $(BIN)/python -e '$(EXTRAS)') \
	|| $(BIN)/python -m pip install --quiet -e '$(EXTRAS)'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

lint: $(STAMP)
	$(BIN)/ruff check mnemosyne cli tests bench examples
	$(BIN)/ruff format --check mnemosyne cli
	$(BIN)/lint-imports

types: $(STAMP)
	$(BIN)/mypy mnemosyne cli

# The TypeScript client and LangGraph.js saver (clients/typescript): Node from Debian where absent,
# its dependencies from the lock file (npm ci, again only when the lock file changes), then the
# type check. Its tests (vitest) run within `unit`, from tests/test_typescript.py.
TS       := clients/typescript
TS_STAMP := $(TS)/node_modules/.installed-$(shell cat $(TS)/package-lock.json | cksum | cut -d' ' -f1)

$(TS_STAMP): $(TS)/package-lock.json
	command -v npm >/dev/null || (apt-get update && apt-get install -y --no-install-recommends nodejs npm)
	cd $(TS) && npm ci --prefer-offline --no-audit --no-fund --loglevel=error
	touch $(TS_STAMP)

ts: $(TS_STAMP)
	cd $(TS) && node_modules/.bin/tsc --noEmit -p .

# The tests start a PostgreSQL server of their own: its binaries must be installed.
# The files go out longest first (tests/support/schedule.py; refresh its durations.json now
# and then), temporary files to /dev/shm when it is a roomy tmpfs (tests/support/scratch.py).
unit: $(STAMP) $(TS_STAMP)
	dpkg -s postgresql-15 >/dev/null 2>&1 || (apt-get update && apt-get install -y --no-install-recommends postgresql-15)
	command -v chromium >/dev/null || (apt-get update && apt-get install -y --no-install-recommends chromium)
	$(PYTEST) -n 2 --dist loadfile  # both cores; a file's tests share one worker (and its fixtures)

# The tier to run between edits (~25 s): every test but those marked slow (crash, processes,
# browser, PostgreSQL, stateful machines on LMDB, ...), property tests on a fifth of their
# examples (tests/support/tiers.py). It needs neither PostgreSQL nor Chromium.
unit-fast: $(STAMP)
	MNEMO_FAST_TESTS=1 $(PYTEST) -n 2 --dist worksteal -m "not slow"  # short tests: balanced one by one

test: lint types ts unit

bench: $(STAMP) $(TS_STAMP)
	$(BIN)/python bench/run.py --out bench/results.md

# A million memories beside 100k, in one run (~2 minutes, ~3 GB of disk in /tmp).
bench-large: $(STAMP)
	$(BIN)/python bench/large.py --out bench/results-large.md

# Recall quality on LoCoMo-format conversations (../shared/data/locomo-dev when present; DATA=DIR
# for another folder), beside bm25s, exact cosine and their fusion, in one run (~2 minutes).
DATA ?= $(wildcard ../shared/data/locomo-dev)
bench-quality: $(STAMP)
	cd bench && ../$(BIN)/python quality.py $(if $(DATA),--data $(abspath $(DATA))) --out results-quality.md

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache $(TS)/node_modules
