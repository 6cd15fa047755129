"""`atf worker` started wrongly, as a new user might: one clear line on stderr naming what is wrong, no
traceback, and never a host that reports ready while it can reach nothing. The exit status tells how it was
started (2: the configuration, the lambdas) from what it could not reach or make (1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from atf_local.environment import DUMMY_CREDENTIALS, REPO
from atf_sdk.worker.host import SOCKET_PATH_BYTES
from tests.conftest import TEST_CONFIG

ENDPOINT_AND_CONFIG = ("ATF_AWS_ENDPOINT", "ATF_CONFIG", "ATF_CONFIG_FILE", "ATF_LAMBDA", "AWS_ENDPOINT_URL")


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "stack.json"
    path.write_text(json.dumps(TEST_CONFIG))
    return path


def worker(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ENDPOINT_AND_CONFIG}
    command = [sys.executable, "-m", "atf_sdk.cli", "worker", "tests.e2e.lambdas:lambdas", *args]
    return subprocess.run(
        command, cwd=REPO, env={**clean, **DUMMY_CREDENTIALS, **env}, capture_output=True, text=True, timeout=120
    )


USAGE, UNREACHED = 2, 1


def one_line_error(result: subprocess.CompletedProcess[str], status: int = USAGE) -> str:
    assert result.returncode == status, result
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    assert "worker host ready" not in result.stdout
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("atf worker: "), line
    return line


def test_no_configuration_says_how_to_give_one() -> None:
    line = one_line_error(worker())
    assert "no stack configuration" in line and "--config" in line and "ATF_CONFIG" in line


def test_a_configuration_that_does_not_read_names_the_file_and_field(tmp_path: Path) -> None:
    missing = one_line_error(worker("--config", str(tmp_path / "nowhere.json")))
    assert "nowhere.json" in missing
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**TEST_CONFIG, "shards": 0}))
    line = one_line_error(worker("--config", str(bad)))
    assert "bad.json" in line and "shards" in line


def test_only_naming_an_unregistered_lambda_names_the_option(config_file: Path) -> None:
    line = one_line_error(worker("--config", str(config_file), "--only", "nope"))
    assert line == "atf worker: --only nope: not registered in tests.e2e.lambdas:lambdas (it registers sleepy, work)"


def test_atf_lambda_is_the_default_of_only_and_named_when_wrong(config_file: Path) -> None:
    line = one_line_error(worker("--config", str(config_file), ATF_LAMBDA="nope"))
    assert line.startswith("atf worker: ATF_LAMBDA nope: not registered"), line


def test_only_wins_over_atf_lambda(config_file: Path) -> None:
    # (the host gets past choosing its lambdas, and stops at the next check: the endpoint)
    line = one_line_error(worker("--config", str(config_file), "--only", "work", ATF_LAMBDA="nope"), UNREACHED)
    assert "ATF_LAMBDA" not in line and "cannot reach table" in line, line


def test_a_host_without_an_endpoint_says_what_it_cannot_reach_instead_of_ready(config_file: Path) -> None:
    # Nothing answers here: AWS's endpoints are out of reach (or refuse the dummy credentials)
    line = one_line_error(worker("--config", str(config_file), "--executors", "1", "--threads", "1"), UNREACHED)
    assert "cannot reach table atf-test-tasks at AWS's endpoints (ATF_AWS_ENDPOINT is not set)" in line, line


def test_a_host_whose_endpoint_does_not_answer_names_it_and_leaves_nothing_behind(
    config_file: Path, short_tmp: Path
) -> None:
    line = one_line_error(
        worker("--config", str(config_file), ATF_AWS_ENDPOINT="http://127.0.0.1:9", TMPDIR=str(short_tmp)), UNREACHED
    )
    assert "cannot reach table atf-test-tasks at http://127.0.0.1:9" in line, line
    assert list(short_tmp.iterdir()) == []  # not the directory of its executors' socket


def test_a_temporary_directory_too_deep_for_the_executors_socket_is_named(config_file: Path, tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    line = one_line_error(worker("--config", str(config_file), TMPDIR=str(deep)), UNREACHED)
    assert line.startswith(f"atf worker: cannot listen on {deep}/atf-host-"), line
    assert line.endswith(f"(at most {SOCKET_PATH_BYTES} bytes: set TMPDIR to a shorter directory)"), line
    assert list(deep.iterdir()) == []


@pytest.mark.parametrize(
    ("source", "named"),
    [
        ('raise RuntimeError("no database at import")', "RuntimeError: no database at import"),
        ("def broken(:\n", "SyntaxError: "),
    ],
    ids=["raises", "does not parse"],
)
def test_a_lambdas_module_that_fails_as_it_imports_is_named_in_one_line(
    config_file: Path, tmp_path: Path, source: str, named: str
) -> None:
    # Given the team's lambdas module, which fails as it imports
    (tmp_path / "team_lambdas.py").write_text(source)
    clean = {k: v for k, v in os.environ.items() if k not in ENDPOINT_AND_CONFIG}
    # When a host is started on it, from the module's directory
    started = subprocess.run(
        [sys.executable, "-m", "atf_sdk.cli", "worker", "team_lambdas:lambdas", "--config", str(config_file)],
        cwd=tmp_path, env={**clean, **DUMMY_CREDENTIALS}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    # Then one line names the module and what it raised
    line = one_line_error(started)
    assert line.startswith(f"atf worker: cannot load the lambdas team_lambdas:lambdas: {named}"), line
