# make run  - the whole framework on an embedded AWS (moto's server on loopback) and a demo
# make test - install what is needed and run the tests
# make serve - the local stack alone, until interrupted

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat requirements-dev.txt layers/pyproject.toml sdk/pyproject.toml local/pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: setup test run serve lint clean

setup: $(STAMP)

$(STAMP): requirements-dev.txt layers/pyproject.toml sdk/pyproject.toml local/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt -e layers -e sdk -e local
	rm -f $(VENV)/.installed-*
	touch $@

test: setup
	$(PY) -m pytest

run: setup
	$(PY) -m atf_local demo

serve: setup
	$(PY) -m atf_local serve

lint: setup
	$(PY) -m ruff check .
	$(PY) -m mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache cdk.out
