# The two commands a newcomer needs: `make demo` and `make test`.
# Both create .venv (if missing) and install the project with its dev extras first.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
DEMO_DIR ?= demo-output
# Test processes (pytest-xdist): one per logical CPU; PYTEST_WORKERS=0 runs the suite in this one process.
# --dist loadgroup keeps each engine's journeys (tests/journeys, xdist_group) on one worker: one imported store each.
PYTEST_WORKERS ?= logical

.PHONY: demo test test-fast lint typecheck format docs bench mutate mutate-policies install clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py --dir $(DEMO_DIR)

test: $(STAMP) lint typecheck
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup --durations=30

# ruff: the linter over everything, the formatter check over the files in scripts/formatted.txt;
# import-linter: the layers' and storage rooms' one-way doors (contracts in pyproject.toml).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check $$(grep -v '^\#' scripts/formatted.txt)
	LINT_IMPORTS=$(CURDIR)/$(BIN)/lint-imports scripts/lint-imports

# mypy, strict on sessionstore.storage and sessionstore.compaction (settings in pyproject.toml).
typecheck: $(STAMP)
	MYPY=$(BIN)/mypy scripts/typecheck

# Formats the whole tree once (after the pending branches are merged); `make lint` then checks every file.
format: $(STAMP)
	RUFF=$(BIN)/ruff scripts/format-all

# docs/cli.md, generated from the typer app (tests/test_cli_reference.py fails when it is stale).
docs: $(STAMP)
	$(BIN)/python -m sessionstore.cli.reference > docs/cli.md

test-fast: $(STAMP)
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup -m 'not slow'

# Mutation testing of the modules that hold promises (scripts/mutate.py; not part of `make test`: it takes hours).
# MODULES narrows it, e.g. `make mutate MODULES=sessionstore/storage/write/fork.py`; MUTATE_FLAGS=--resume goes on
# from a stopped run (build/mutate/results.jsonl; add --retry-survivors to run the survivors again after adding
# tests for them); results in build/mutate/report.md.
mutate: $(STAMP)
	$(BIN)/python scripts/mutate.py $(MUTATE_FLAGS) $(MODULES)

# The row-level security policies (SQL, out of scripts/mutate.py's reach): each clause made `true` in turn, against the
# attacker suite and the ownership tests (needs SESSIONSTORE_TEST_PG_URL); results in build/mutate/policies.md.
mutate-policies: $(STAMP)
	$(BIN)/python scripts/mutate_policies.py $(MUTATE_FLAGS)

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	$(BIN)/python bench/append_resume.py
	$(BIN)/python bench/rewrite.py
	$(BIN)/python bench/api_compaction.py
	$(BIN)/python bench/prepare.py
	$(BIN)/python bench/import_export.py
	$(BIN)/python bench/watch.py
	$(BIN)/python bench/token_guard.py
	command -v rg >/dev/null || apt-get install -y ripgrep || echo "bench/search.py needs ripgrep (Debian: apt-get install ripgrep)"
	$(BIN)/python bench/search.py
	$(BIN)/python bench/browse.py

clean:
	rm -rf $(VENV) $(DEMO_DIR) .pytest_cache
