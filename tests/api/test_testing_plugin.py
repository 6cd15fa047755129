"""The pytest plugin and the local stack helpers as a team meets them, each in a pytest of its own:
docs/testing.md's example project passes as written; a session that asks for none of the fixtures
loads neither atf_local nor moto; a missing setting or a worker host that cannot start fails the test
that asked, saying why; and the helpers stop what they started."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from atf_core.config import StackConfig
from atf_core.errors import Unavailable
from atf_sdk.client import AtfClient, RetryPolicy
from atf_sdk.testing import local_stack, worker_host
from tests.docs.markdown import blocks

REPO = Path(__file__).resolve().parents[2]
PROJECT = "~/atf-shop/"
QUIET_STACK = {"name": "team", "table_name": "team-tasks", "lambdas": {"tick": {"priorities": ["normal"]}}}


def _documented_project(home: Path) -> Path:
    """The files docs/testing.md writes into ~/atf-shop, written under `home` instead."""
    written = [b for b in blocks(REPO / "docs" / "testing.md", REPO) if b.file and b.file.startswith(PROJECT)]
    assert len(written) == 6, [b.file for b in written]
    for block in written:
        path = home / (block.file or "").removeprefix("~/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block.text)
    return home / PROJECT.removeprefix("~/")


def _pytest(project: Path, *args: str) -> tuple[int, str]:
    """pytest in `project` as a team runs it: nothing of this session's environment (stack, credentials)."""
    ours = ("ATF_", "AWS_", "POWERTOOLS_", "PYTEST_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(ours)}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args]
    done = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=600, check=False)
    return done.returncode, done.stdout + done.stderr


def _passed(output: str) -> int:
    summary = re.search(r"(\d+) passed", output)
    return int(summary.group(1)) if summary else 0


def test_the_documented_example_passes_as_written(tmp_path: Path) -> None:
    project = _documented_project(tmp_path)
    code, output = _pytest(project, "tests/test_charge.py")
    assert code == 0 and _passed(output) == 6, output
    code, output = _pytest(project)
    assert code == 0 and _passed(output) == 10, output


def test_a_session_that_asks_for_no_fixture_starts_nothing(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    (tmp_path / "test_plain.py").write_text(
        "import sys\n\n\n"
        "def test_plain(request):\n"
        "    assert request.config.pluginmanager.get_plugin('atf') is not None\n"
        "    loaded = [m for m in sys.modules if m.split('.')[0] in ('atf_local', 'moto', 'httpx')]\n"
        "    assert loaded == []\n"
    )
    code, output = _pytest(tmp_path)
    assert code == 0 and _passed(output) == 1, output
    code, output = _pytest(tmp_path, "--fixtures")
    assert all(name in output for name in ("atf_stack", "atf_client", "atf_async_client", "atf_worker")), output
    code, output = _pytest(tmp_path, "-p", "no:atf", "--fixtures")
    assert "atf_client" not in output


def test_a_missing_setting_fails_the_test_that_asked(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    (tmp_path / "test_client.py").write_text("def test_client(atf_client):\n    pass\n")
    code, output = _pytest(tmp_path)
    assert code == 1 and "set atf_config (a stack configuration file) in your pytest configuration" in output


def test_a_worker_host_that_cannot_start_fails_with_its_log(tmp_path: Path) -> None:
    (tmp_path / "stack.json").write_text(StackConfig.model_validate(QUIET_STACK).model_dump_json())
    settings = '[tool.pytest.ini_options]\natf_config = "stack.json"\natf_lambdas = "no_such_module:lambdas"\n'
    (tmp_path / "pyproject.toml").write_text(settings)
    (tmp_path / "test_worker.py").write_text(
        "def test_stack(atf_client):\n    assert atf_client.gates() == []\n\n\ndef test_worker(atf_worker):\n    pass\n"
    )
    code, output = _pytest(tmp_path)
    assert code == 1 and _passed(output) == 1, output
    assert "the worker host exited with 2 before it was ready" in output  # its lambdas argument: a usage error
    assert "No module named 'no_such_module'" in output


@pytest.mark.timeout(240)
def test_the_helpers_stop_what_they_started(tmp_path: Path) -> None:
    config = StackConfig.model_validate(QUIET_STACK)
    lambdas = tmp_path / "team_lambdas.py"
    lambdas.write_text(
        "from atf_sdk import Lambdas\n\nlambdas = Lambdas()\nlambdas.register('tick')(lambda task: None)\n"
    )
    with (
        local_stack(config, tmp_path / "stack") as stack,
        worker_host(stack, "team_lambdas:lambdas", cwd=tmp_path) as worker,
    ):
        with stack.client() as atf:
            assert atf.wait(atf.schedule("tick").id, timeout_s=60).status.value == "success"
        assert stack.environment()["ATF_API_URL"] == stack.api_url
    with pytest.raises(ProcessLookupError):
        os.kill(worker.pid, 0)
    with stack.client() as atf, pytest.raises(Unavailable):
        atf.gates()


@pytest.mark.timeout(240)
def test_a_session_stopped_with_sigterm_stops_its_stack_and_worker_host(tmp_path: Path) -> None:
    # Given a session whose test holds a worker host on the plugin's stack
    (tmp_path / "stack.json").write_text(StackConfig.model_validate(QUIET_STACK).model_dump_json())
    (tmp_path / "team_lambdas.py").write_text(
        "from atf_sdk import Lambdas\n\nlambdas = Lambdas()\nlambdas.register('tick')(lambda task: None)\n"
    )
    settings = '[tool.pytest.ini_options]\natf_config = "stack.json"\natf_lambdas = "team_lambdas:lambdas"\n'
    (tmp_path / "pyproject.toml").write_text(settings)
    (tmp_path / "test_long.py").write_text(
        "import pathlib, time\n\n\n"
        "def test_long(atf_stack, atf_worker):\n"
        "    pathlib.Path('started').write_text(f'{atf_worker.pid} {atf_stack.api_url}')\n"
        "    time.sleep(600)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATF_", "AWS_", "PYTEST_"))}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--basetemp", str(tmp_path / "base")]
    session = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        started = tmp_path / "started"
        deadline = time.monotonic() + 180
        while not started.exists() and session.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        worker_pid, api_url = started.read_text().split()
        # When the session is terminated, as a CI job's timeout terminates it
        session.send_signal(signal.SIGTERM)
        session.wait(timeout=120)
        # Then neither its worker host nor its stack outlives it
        with pytest.raises(ProcessLookupError):
            os.kill(int(worker_pid), 0)
        with AtfClient(api_url, retry=RetryPolicy(attempts=1)) as atf, pytest.raises(Unavailable):
            atf.gates()
    finally:
        session.kill()
        subprocess.run(["pkill", "-KILL", "-f", str(tmp_path)], check=False)  # what the old code left running
