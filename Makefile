# `make demo`; `make test` (every test), `make test-fast` (not slow, not browser) and `make lint` (ruff, mypy,
# import-linter): the tiers of docs/guide/development.md. Each creates .venv on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/pip --disable-pip-version-check
REPORT ?= reports/demo
PYTEST_ARGS ?= -n 2

.PHONY: demo test test-fast lint dist venv venv-dev clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade "pip>=24"

# The package with every extra (the demo runs TDG, CCI, the bench and the judge). torch/torchvision
# come from the normal index (the CPU machines here resolve them from their local wheel cache).
$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(PIP) install -e ".[all]"
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(PIP) install -e ".[dev]"
	touch $@

venv: $(VENV)/.installed
venv-dev: $(VENV)/.installed-dev

demo: $(VENV)/.installed
	$(BIN)/concept-grounding demo --out $(REPORT)

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The quick tier while editing: every test but the `slow` and `browser` ones.
test-fast: $(VENV)/.installed-dev
	$(BIN)/python -m pytest $(PYTEST_ARGS) -m "not slow and not browser"

# Lint, formatting, types and the layer contracts ([tool.ruff], [tool.mypy], [tool.importlinter] in pyproject.toml).
lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# The release files: wheel + sdist in dist/, checked as PyPI would.
dist: $(VENV)/.installed-dev
	rm -rf dist
	$(BIN)/python -m build
	$(BIN)/twine check --strict dist/*

clean:
	rm -rf $(VENV) reports build dist *.egg-info
