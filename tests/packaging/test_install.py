"""The framework as a team installs it: wheels built from this tree, installed into a fresh virtual
environment outside the repository; the installed client schedules through the local stack and a
worker host runs the lambdas of a project that is not this repository (examples/team-project, copied
out). One venv for the module; pip's cache keeps it to a minute or two after the first run."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from atf_core.config import StackConfig
from atf_sdk.testing.stack import RunningStack, local_stack
from tests.packaging.wheels import ROOT, VERSION, build_wheels, fresh_venv, install

pytestmark = pytest.mark.stack
TEAM_PROJECT = ROOT / "examples" / "team-project"
READY_TIMEOUT_S = 120


@dataclass(frozen=True)
class Installed:
    work: Path  # outside the repository
    wheels: Path
    python: Path

    def run(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.python), *args], cwd=self.work, env=env or _outside_env(), capture_output=True, text=True,
            timeout=timeout,
        )  # fmt: skip

    def script(self, name: str) -> str:
        return str(self.python.parent / name)


def _outside_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without anything that points into the repository's venv or tree."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(str(ROOT)))
    return {**env, **(extra or {})}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    work = tmp_path_factory.mktemp("packaging")
    assert ROOT not in work.parents
    wheels = build_wheels(work)
    python = fresh_venv(work / "venv")
    install(python, wheels, f"atf-sdk=={VERSION}")  # the client alone; the team's project adds [worker]
    return Installed(work, wheels, python)


@pytest.fixture(scope="module")
def team(installed: Installed) -> Path:
    project = installed.work / "team-project"
    shutil.copytree(TEAM_PROJECT, project, ignore=shutil.ignore_patterns("wheels", "cdk.out", "__pycache__"))
    install(installed.python, installed.wheels, str(project))  # as its Dockerfile does: atf-sdk[worker] and itself
    return project


def _metadata(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return archive.read(name).decode()


def _files(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_the_wheels_carry_versions_license_readme_classifiers_and_types(installed: Installed) -> None:
    wheels = {w.name.split("-")[0]: w for w in installed.wheels.glob("*.whl")}
    assert set(wheels) == {"atf_core", "atf_sdk", "atf_cdk"}
    changelog = (ROOT / "CHANGELOG.md").read_text()
    (released,) = re.findall(r"^## \[?(\d+\.\d+\.\d+)\]?", changelog, re.MULTILINE)[:1]
    for package, wheel in wheels.items():
        metadata = _metadata(wheel)
        assert f"\nVersion: {VERSION}\n" in metadata and released == VERSION, package
        assert "License-Expression: Apache-2.0" in metadata and "Requires-Python: >=3.11" in metadata
        assert "Classifier: Typing :: Typed" in metadata and "Description-Content-Type: text/markdown" in metadata
        files = _files(wheel)
        assert any(f.endswith(".dist-info/licenses/LICENSE") for f in files), package
        assert f"{package}/py.typed" in files, package
        assert not any(f.startswith(("tests/", "bench/", "local/")) for f in files), package
    sdk = _metadata(wheels["atf_sdk"])
    assert re.search(r"^Requires-Dist: atf-core<0\.2,>=0\.1\.0$", sdk, re.MULTILINE)
    for extra, dependency in (("worker", "aws-lambda-powertools"), ("cli", "rich"), ("async", "httpx")):
        assert re.search(rf'^Requires-Dist: {dependency}>=\S+; extra == "{extra}"$', sdk, re.MULTILINE), extra


def test_the_cdk_wheel_ships_the_handlers_and_the_lock_the_tests_ran(installed: Installed) -> None:
    (wheel,) = installed.wheels.glob("atf_cdk-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        shipped = {n.removeprefix("atf_cdk/bundle/"): archive.read(n) for n in archive.namelist() if "/bundle/" in n}
    tree = {
        str(p.relative_to(ROOT)): p.read_bytes()
        for p in (ROOT / "functions").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert {k: v for k, v in shipped.items() if k != "requirements.lock"} == tree
    assert shipped["requirements.lock"] == (ROOT / "requirements.lock").read_bytes()
    cdk = tomllib.loads((ROOT / "infra" / "pyproject.toml").read_text())["project"]
    assert cdk["version"] == VERSION


def test_a_client_only_install_imports_lightly_and_names_the_missing_extra(installed: Installed) -> None:
    probe = (
        "import sys; from atf_sdk import AtfClient, Lambdas, TaskContext, Retry, Fatal; AtfClient; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'aws_lambda_powertools', 'rich', 'httpx', 'moto'}))"
    )
    imported = installed.run("-c", probe)
    assert imported.returncode == 0 and imported.stdout.strip() == "[]", imported.stderr
    listed = installed.run("-m", "pip", "list", "--format=freeze")
    assert not re.search(r"^(aws-lambda-powertools|rich|httpx|moto|aws-cdk-lib)==", listed.stdout, re.M | re.I)
    for command in ([installed.script("atf"), "--version"], [str(installed.python), "-m", "atf_sdk", "--version"]):
        version = subprocess.run(command, capture_output=True, text=True, env=_outside_env(), cwd=installed.work)
        assert (version.returncode, version.stdout.strip()) == (0, f"atf {VERSION}"), version.stderr
    for verb, extra in ((["worker", "thumbnails.lambdas:lambdas"], "worker"), (["top", "--once"], "cli")):
        refused = subprocess.run([installed.script("atf"), *verb], capture_output=True, text=True, env=_outside_env())
        assert refused.returncode == 1
        assert refused.stderr.strip().splitlines() == [refused.stderr.strip()], refused.stderr  # one line
        assert f"pip install 'atf-sdk[{extra}]'" in refused.stderr
    helped = subprocess.run(
        [installed.script("atf"), "top", "--help"], capture_output=True, text=True, env=_outside_env()
    )
    assert helped.returncode == 0 and "pip install 'atf-sdk[cli]'" in helped.stdout, helped.stderr
    host = installed.run("-c", "import atf_sdk.worker.host")
    assert "pip install 'atf-sdk[worker]'" in host.stderr.strip().splitlines()[-1]
    asynchronous = installed.run("-c", "import atf_sdk.async_client").stderr.strip().splitlines()[-1]
    assert "needs atf-sdk's 'async' extra" in asynchronous and "pip install 'atf-sdk[async]'" in asynchronous


@pytest.fixture(scope="module")
def stack(team: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    config = StackConfig.from_file(team / "stack.json")
    with local_stack(config, tmp_path_factory.mktemp("team-stack")) as running:
        yield running


SCHEDULE = """
import json, sys
from atf_sdk import AtfClient
with AtfClient.from_env() as atf:
    ids = [atf.schedule("resize", {"image": "cat.png", "width": 64}).id, atf.schedule("notify", {"user": "bea"}).id]
    print(json.dumps(ids))
"""
WAIT = """
import json, sys
from atf_sdk import AtfClient
with AtfClient.from_env() as atf:
    done = [atf.wait(task_id, timeout_s=90) for task_id in json.loads(sys.argv[1])]
    print(json.dumps([[task.status.value, task.attempt] for task in done]))
"""


def test_the_installed_client_schedules_and_a_host_runs_the_teams_lambdas(
    installed: Installed, team: Path, stack: RunningStack
) -> None:
    env = _outside_env(stack.environment())
    env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    scheduled = installed.run("-c", SCHEDULE, env=env)
    assert scheduled.returncode == 0, scheduled.stderr
    log = installed.work / "worker.log"
    command = [installed.script("atf"), "worker", "thumbnails.lambdas:lambdas", "--config", str(team / "stack.json")]
    command += ["--executors", "1", "--threads", "2", "--receive-wait", "1"]
    with log.open("wb") as out:
        host = subprocess.Popen(command, cwd=installed.work, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
        try:
            _wait_for(log, host, "worker host ready")
            waited = installed.run("-c", WAIT, scheduled.stdout.strip(), env=env, timeout=150)
        finally:
            host.send_signal(signal.SIGTERM)
            host.wait(timeout=60)
    assert waited.returncode == 0, waited.stderr
    # notify has no webhook token here: Retry once, then it runs
    assert [tuple(s) for s in json.loads(waited.stdout)] == [("success", 1), ("success", 2)]
    text = log.read_text(errors="replace")
    assert "resized cat.png to 64px into s3://local/thumbs/ (attempt 1)" in text
    # The host ran the installed packages, not this tree's
    assert (
        str(ROOT) not in text
        and str(installed.python.parent.parent)
        in installed.run("-c", "import atf_sdk, thumbnails; print(atf_sdk.__file__, thumbnails.__file__)").stdout
    )


def _wait_for(log: Path, process: subprocess.Popen[bytes], ready: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while ready not in log.read_text(errors="replace"):
        assert process.poll() is None, f"the worker host exited:\n{log.read_text(errors='replace')[-3000:]}"
        assert time.monotonic() < deadline, f"the worker host was not ready:\n{log.read_text(errors='replace')[-3000:]}"
        time.sleep(0.2)


def test_without_the_cli_extra_a_verb_stops_before_it_acts_and_json_needs_no_extra(
    installed: Installed, team: Path, stack: RunningStack
) -> None:
    env = {k: v for k, v in _outside_env(stack.environment()).items() if k != "PYTHONPATH"}
    atf = installed.script("atf")
    # Given the client and the worker extra installed, not the cli extra (rich)
    with stack.client() as client:
        before = len(client.bulk_cancel(lambda_name="resize", dry_run=True).matched)
        # When a verb that would change something is asked for a table
        refused = subprocess.run(
            [atf, "schedule", "resize", "--delay", "3000"], capture_output=True, text=True, env=env
        )
        # Then it stops in one line naming the extra and --json, having changed nothing
        assert refused.returncode == 1 and refused.stderr.strip().splitlines() == [refused.stderr.strip()]
        assert "pip install 'atf-sdk[cli]'" in refused.stderr and "--json" in refused.stderr, refused.stderr
        assert len(client.bulk_cancel(lambda_name="resize", dry_run=True).matched) == before
        # And with --json the same verb needs no extra
        done = subprocess.run(
            [atf, "--json", "schedule", "resize", "--delay", "3000"], capture_output=True, text=True, env=env
        )
        assert done.returncode == 0, done.stderr
        task_id = json.loads(done.stdout)["id"]
        assert client.get(task_id).status.value == "new"
        client.cancel(task_id)
