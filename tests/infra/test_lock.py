"""What is tested is what is deployed: one lock for the tests, the Lambda layer and the worker image."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import version

from atf_cdk.constructs import layer
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.infra.bounds import LOCK, declared, locked, lower_bound
from tests.infra.conftest import ROOT

DOCKERFILE = ROOT / "examples" / "worker.Dockerfile"


def test_the_lock_satisfies_every_declared_requirement() -> None:
    """A requirement changed without `make lock` fails here."""
    pins = locked()
    for source, requirement in declared():
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement} ({source}) is not in {LOCK.name}: run `make lock`"
        assert requirement.specifier.contains(pins[name]), f"{LOCK.name} pins {name}=={pins[name]}: run `make lock`"


def test_the_tests_run_the_locked_versions() -> None:
    for name, pinned in locked().items():
        assert Version(version(name)) == pinned, f"{name}: `make setup` installs {LOCK.name}'s {pinned}"


def test_every_requirement_has_a_lower_bound() -> None:
    # `make test-lowest` installs each at its bound and checks that the lowest resolution kept it there.
    assert all(lower_bound(requirement) is not None for _, requirement in declared())


def test_the_layer_installs_the_locked_versions_for_the_lambda_runtime() -> None:
    command = layer.pip_command("/out", layer.requirements(), str(LOCK))
    assert command[command.index("--constraint") + 1] == str(LOCK)
    assert layer.LOCK == LOCK
    # Only what the handlers import goes in: no version there, the lock decides.
    assert all(not re.search(r"[<>=]", requirement) for requirement in layer.HANDLER_REQUIREMENTS)


def test_the_lambda_runtime_the_worker_image_and_the_lock_are_the_python_the_tests_run_on() -> None:
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert layer.RUNTIME.name == f"python{running}"
    assert re.search(rf"^FROM \S+/python:{re.escape(running)}-slim", DOCKERFILE.read_text(), re.MULTILINE)
    assert re.search(rf"^LOCK_PYTHON := {re.escape(running)}$", (ROOT / "Makefile").read_text(), re.MULTILINE)


def test_make_refuses_a_venv_of_another_python_before_installing_into_it() -> None:
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert subprocess.run(["make", "-s", "python-version"], cwd=ROOT, capture_output=True).returncode == 0
    other = subprocess.run(
        ["make", "-s", "python-version", "LOCK_PYTHON=3.10"], cwd=ROOT, capture_output=True, text=True
    )
    assert other.returncode != 0
    assert (
        f"make: .venv is Python {running}, and the tests, the Lambda runtime and the worker image run on Python 3.10:"
        " rm -rf .venv, then make again with PYTHON=python3.10"
    ) in other.stderr


def test_the_worker_image_installs_from_the_lock() -> None:
    text = DOCKERFILE.read_text()
    assert re.search(r"^COPY requirements\.lock ", text, re.MULTILINE)
    (install,) = [line for line in text.splitlines() if line.startswith("RUN pip install")]
    assert "--constraint /tmp/atf/requirements.lock" in install
    # atf-sdk alone is the client: a worker host needs its worker extra (Powertools), or `atf worker` stops.
    assert re.search(r"""["']/tmp/atf/sdk\[[^\]]*\bworker\b[^\]]*\]["']""", install), install
