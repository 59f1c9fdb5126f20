# The two commands a newcomer needs: `make demo` and `make test`.
# Both create .venv (if missing) and install the project with its dev extras first.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
DEMO_DIR ?= demo-output

.PHONY: demo test test-fast bench install clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py --dir $(DEMO_DIR)

test: $(STAMP)
	$(BIN)/python -m pytest

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m 'not slow'

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	$(BIN)/python bench/append_resume.py
	$(BIN)/python bench/rewrite.py
	$(BIN)/python bench/prepare.py
	$(BIN)/python bench/import_export.py
	$(BIN)/python bench/watch.py
	$(BIN)/python bench/token_guard.py

clean:
	rm -rf $(VENV) $(DEMO_DIR) .pytest_cache
