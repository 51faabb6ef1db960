# Two commands: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/pip --disable-pip-version-check
REPORT ?= reports/demo
PYTEST_ARGS ?= -n 2

.PHONY: demo test dist venv venv-dev clean

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

# The release files: wheel + sdist in dist/, checked as PyPI would.
dist: $(VENV)/.installed-dev
	rm -rf dist
	$(BIN)/python -m build
	$(BIN)/twine check --strict dist/*

clean:
	rm -rf $(VENV) reports build dist *.egg-info
