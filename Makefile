# make run  - the whole framework on an embedded AWS (moto's server on loopback) and a demo
# make test - install what is needed and run the tests
# make test-lowest - make test again on the lowest version of every dependency the requirements allow
# make lock - recompile requirements.lock after a requirement changed (needs PyPI)
# make serve - the local stack alone, until interrupted (CONFIG=path/to/stack.json for your own configuration)
# make bench - the benchmarks (about ten minutes): bench/results/report.md and its figures
# make faults - the fault-injection suite (about twenty minutes, soak included): local/atf_local/faults/results.md

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
# Every version the tests run with, compiled from requirements-dev.txt and the packages' pyproject.toml;
# the Lambda layer and the worker image install from it too.
LOCK := requirements.lock
PACKAGES := layers/pyproject.toml sdk/pyproject.toml local/pyproject.toml infra/pyproject.toml
STAMP := $(VENV)/.installed-$(shell cat $(LOCK) $(PACKAGES) | cksum | cut -d' ' -f1)
# What the lock is compiled from: the declared requirements and the project's own packages (left out of it).
REQUIREMENTS := printf -- '-r requirements-dev.txt\n-e ./layers\n-e ./sdk[async,testing]\n-e ./local\n-e ./infra\n'
OWN := --no-emit-package atf-core --no-emit-package atf-sdk --no-emit-package atf-local --no-emit-package atf-cdk
LOWEST := .venv-lowest
# The tests run on pytest-xdist workers, one more than the machine has cores (TEST_WORKERS=1 for one process):
# the stack-level tiers spend much of their time waiting on real timers (leases, heartbeats, fault windows), and
# with one worker a core those waits left cores idle. On two cores the third worker took pytest from 585 to
# 468-471 s. A fourth saved 36 s more; it stops at one over because every worker added also slows the stack
# tests that measure time on the shared cores (the clocks fault scenario took 50 s with two, 108-111 with more).
# A module's tests go to one worker together, so each module's stack starts once, and tests/infra's modules all
# go to one, which synthesizes the CDK app once (tests/conftest.py); every stack and server takes free ports of
# its own. The modules go out in the order tests/conftest.py sorts them (the long tiers first), not xdist's (most
# tests first).
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
PARALLEL := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
# The Lambda runtime's (infra/atf_cdk/constructs/layer.py); a test keeps them equal
LOCK_PYTHON := 3.11
# The tests, the Lambda runtime and the worker image run one Python, LOCK_PYTHON (tests/infra/test_lock.py holds them
# together): a venv of another is refused as soon as it is made, before the installs, rather than by that test after.
CHECK_PYTHON = $(PY) -c 'import sys; found = "%d.%d" % sys.version_info[:2]; sys.exit(None if found == "$(LOCK_PYTHON)" \
	else "make: $(VENV) is Python " + found + ", and the tests, the Lambda runtime and the worker image run on Python" \
	" $(LOCK_PYTHON): rm -rf $(VENV), then make again with PYTHON=python$(LOCK_PYTHON)")'

.PHONY: setup test test-lowest lock run serve lint clean infra-cli bench chromium faults python-version

setup: $(STAMP)

$(STAMP): $(LOCK) $(PACKAGES)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(CHECK_PYTHON)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r $(LOCK) -c $(LOCK) -e layers -e 'sdk[async,testing]' -e local -e infra
	rm -f $(VENV)/.installed-*
	touch $@

lock: setup
	$(REQUIREMENTS) | $(UV) pip compile - --quiet --universal --python-version $(LOCK_PYTHON) $(OWN) \
		--custom-compile-command "make lock" -o $(LOCK)

# A venv of its own with the lowest allowed version of each direct requirement (uv's lowest-direct
# resolution), checked to be the declared bounds, then lint and the tests that call the libraries
# directly (unit, functional, API, infra, telemetry), but for the check that the venv runs the locked
# versions. The process-level tiers (e2e, faults, console, docs) make the same library calls through
# processes and would double CI's time. Two tiers never run on these versions and are left out: packaging
# installs the wheels into a fresh venv that resolves the newest versions (what make test already runs), and
# bench's code runs only in the locked venv (make bench). .ci/run runs it after `make test`. The venv is
# seeded with pip: the asset tests build wheels with the interpreter that runs them.
test-lowest: setup infra-cli chromium
	rm -rf $(LOWEST)
	$(UV) venv --quiet --seed --no-python-downloads --python $(PYTHON) $(LOWEST)
	$(REQUIREMENTS) | $(UV) pip install --quiet --python $(LOWEST)/bin/python --resolution lowest-direct -r -
	$(LOWEST)/bin/python -m tests.infra.bounds
	$(LOWEST)/bin/python -m ruff check .
	$(LOWEST)/bin/python -m mypy
	$(LOWEST)/bin/python -m pytest $(PARALLEL) -p no:cacheprovider \
		--deselect tests/infra/test_lock.py::test_the_tests_run_the_locked_versions \
		--ignore tests/e2e --ignore tests/faults --ignore tests/console --ignore tests/docs \
		--ignore tests/packaging --ignore tests/bench

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
	$(PY) -m pytest $(PARALLEL)

run: setup
	$(PY) -m atf_local demo

serve: setup
	$(PY) -m atf_local serve $(if $(CONFIG),--config "$(CONFIG)")

bench: setup
	$(PY) -m pip install --quiet -r bench/requirements.txt -c $(LOCK)
	$(PY) -m bench

faults: setup
	$(PY) -m atf_local.faults run

lint: setup
	$(PY) -m ruff check .
	$(PY) -m mypy

python-version:
	@$(CHECK_PYTHON)

clean:
	rm -rf $(VENV) $(LOWEST) .pytest_cache .mypy_cache .ruff_cache cdk.out infra/node_modules
