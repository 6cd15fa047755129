# make run  - the whole framework on an embedded AWS (moto's server on loopback) and a demo
# make test - install what is needed and run the tests
# make serve - the local stack alone, until interrupted (CONFIG=path/to/stack.json for your own configuration)
# make bench - the benchmarks (about ten minutes): bench/results/report.md and its figures
# make faults - the fault-injection suite (about twenty minutes, soak included): local/atf_local/faults/results.md

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat requirements-dev.txt layers/pyproject.toml sdk/pyproject.toml local/pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: setup test run serve lint clean infra-cli bench chromium faults

setup: $(STAMP)

$(STAMP): requirements-dev.txt layers/pyproject.toml sdk/pyproject.toml local/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt -e layers -e sdk -e local
	rm -f $(VENV)/.installed-*
	touch $@

# The CDK CLI, pinned in infra/package-lock.json (the app itself is Python: infra/app.py)
CDK := infra/node_modules/.bin/cdk

infra-cli: $(CDK)

$(CDK): infra/package.json infra/package-lock.json
	cd infra && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Debian's Chromium for the console's browser tests: Playwright drives it and never downloads a browser
chromium:
	command -v chromium >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium)

test: setup infra-cli chromium
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(PY) -m pytest

run: setup
	$(PY) -m atf_local demo

serve: setup
	$(PY) -m atf_local serve $(if $(CONFIG),--config "$(CONFIG)")

bench: setup
	$(PY) -m pip install --quiet -r bench/requirements.txt
	$(PY) -m bench

faults: setup
	$(PY) -m atf_local.faults run

lint: setup
	$(PY) -m ruff check .
	$(PY) -m mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache cdk.out infra/node_modules
