"""`python -m atf_local serve` runs the configuration it is given: --config, else ATF_CONFIG (JSON),
else ATF_CONFIG_FILE (a path), else examples/stack.json; and tells a worker host what it needs."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from atf_core.config import CONFIG_ENV, CONFIG_FILE_ENV, StackConfig
from atf_core.errors import UnknownLambda
from atf_local.__main__ import DEFAULT_CONFIG, serve_config
from atf_local.environment import DUMMY_CREDENTIALS, REPO
from atf_local.iam.template import template_for
from atf_local.process_tree import children_of
from atf_local.stack import LocalStack, free_port
from atf_sdk.client import AtfClient, RetryPolicy
from tests.conftest import interrupt_stack


def _config(path: Path, lambda_name: str) -> Path:
    path.write_text(json.dumps({"name": "own", "table_name": f"{lambda_name}-tasks", "lambdas": {lambda_name: {}}}))
    return path


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    monkeypatch.delenv(CONFIG_FILE_ENV, raising=False)
    return _config(tmp_path / "option.json", "from-option"), _config(tmp_path / "file.json", "from-file")


def test_the_option_comes_first(files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    option, file = files
    monkeypatch.setenv(CONFIG_ENV, file.read_text().replace("from-file", "inline"))
    monkeypatch.setenv(CONFIG_FILE_ENV, str(file))
    config, path = serve_config(option)
    assert list(config.lambdas) == ["from-option"] and path == option.resolve()


def test_then_inline_json_then_a_file_then_the_example(
    files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, file = files
    assert serve_config(None)[1] == DEFAULT_CONFIG.resolve()
    monkeypatch.setenv(CONFIG_FILE_ENV, str(file))
    config, path = serve_config(None)
    assert list(config.lambdas) == ["from-file"] and path == file.resolve()
    monkeypatch.setenv(CONFIG_ENV, file.read_text().replace("from-file", "inline"))
    config, path = serve_config(None)
    assert list(config.lambdas) == ["inline"] and path is None


@pytest.mark.parametrize(
    ("content", "says"),
    [(None, "cannot read the configuration"), ("{", "is not valid"), ('{"lambdas": {"Bad Name": {}}}', "is not valid")],
)
def test_a_bad_configuration_is_one_line(
    files: tuple[Path, Path], tmp_path: Path, content: str | None, says: str
) -> None:
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SystemExit) as exited:
        serve_config(path)
    message = str(exited.value.code)
    assert message.startswith("atf_local serve: ") and says in message and str(path) in message
    assert "\n" not in message and "Traceback" not in message


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[list[str], str, int]]:
    """serve started with ATF_CONFIG_FILE alone (no --config): its output lines, its API's URL and the SQS
    port it was given."""
    config = _config(tmp_path / "own.json", "resize")
    template_for(StackConfig.from_file(config))  # a first synthesis (tens of seconds) before the wait starts
    api_port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in (CONFIG_ENV, CONFIG_FILE_ENV)}
    env.update({**DUMMY_CREDENTIALS, CONFIG_FILE_ENV: str(config), "PYTHONPATH": f"{REPO}:{REPO / 'local'}"})
    command = [sys.executable, "-m", "atf_local", "serve", "--aws-port", str(free_port())]
    sqs_port = free_port()
    command += ["--sqs-port", str(sqs_port), "--api-port", str(api_port), "--console-port", "0"]
    process = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        for line in process.stdout or ():
            lines.append(line.rstrip())
            if "atf_local credentials" in line:  # the last line serve prints once ready
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert ready.wait(60), f"serve did not come up: {lines}"
        yield lines, f"http://127.0.0.1:{api_port}", sqs_port
    finally:
        interrupt_stack(process)


def test_serve_runs_the_file_named_by_atf_config_file(served: tuple[list[str], str, int], tmp_path: Path) -> None:
    lines, url, sqs_port = served
    path = (tmp_path / "own.json").resolve()
    assert f"(SQS served on http://127.0.0.1:{sqs_port})" in lines[0]
    assert f"  configuration: {path}, lambdas resize" in lines
    assert f"  export {CONFIG_FILE_ENV}={path}; " in lines[-1] and "credentials worker --aws-port" in lines[-1]
    with AtfClient(url, region="us-east-1", retry=RetryPolicy(attempts=2, base_s=0.05)) as atf:
        assert atf.schedule("resize", {"image": "cat.png"}).created
        with pytest.raises(UnknownLambda):
            atf.schedule("greet")  # the example configuration's: not served


def test_a_stack_that_cannot_start_stops_what_it_started() -> None:
    """A port taken before the DynamoDB server binds it: an OSError the caller can act on (a test's stack tries other
    ports), and the SQS process, already started, stopped too."""
    from tests.api.conftest import API_CONFIG

    saved = dict(os.environ)  # start() points this process at the stack: put it all back after
    try:
        with socket.create_server(("127.0.0.1", 0)) as taken:
            stack = LocalStack(StackConfig.model_validate(API_CONFIG), aws_port=taken.getsockname()[1], api_port=None)
            with pytest.raises(OSError) as refused:
                stack.start(with_consumer=False)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert refused.value.errno == errno.EADDRINUSE
    assert stack._sqs is not None and stack._sqs.poll() is not None  # it had started, and it has ended


@pytest.mark.parametrize("option", ["--aws-port", "--sqs-port"])
def test_serve_on_a_port_in_use_says_so_in_one_line(tmp_path: Path, option: str) -> None:
    """Taken SQS port included: a server already there would have answered for the stack's own."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        ports = {"--aws-port": port} if option == "--aws-port" else {"--aws-port": free_port(), "--sqs-port": port}
        env = {k: v for k, v in os.environ.items() if k not in (CONFIG_ENV, CONFIG_FILE_ENV)}
        env.update({**DUMMY_CREDENTIALS, "PYTHONPATH": f"{REPO}:{REPO / 'local'}"})
        command = [sys.executable, "-m", "atf_local", "serve", "--api-port", "0", "--console-port", "0"]
        command += [str(part) for pair in ports.items() for part in pair]
        ended = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert ended.returncode == 1 and "Traceback" not in ended.stderr, ended.stderr
    named = ", ".join(f"{name} {number}" for name, number in ports.items())
    assert ended.stderr.strip().splitlines()[-1] == (
        f"atf_local serve: Address already in use on 127.0.0.1 ({named}): stop what serves there, or pass another port"
    )


@pytest.mark.parametrize("when", ["ready", "starting"])
def test_ctrl_c_at_the_terminal_stops_the_stack_without_a_traceback(tmp_path: Path, when: str) -> None:
    """Ctrl-C signals the terminal's whole foreground process group: serve and its children (the SQS server,
    the consumer). Each child printed a KeyboardInterrupt traceback, from its wait or its imports."""
    env = {k: v for k, v in os.environ.items() if k not in (CONFIG_ENV, CONFIG_FILE_ENV)}
    env.update({**DUMMY_CREDENTIALS, "PYTHONPATH": f"{REPO}:{REPO / 'local'}"})
    command = [sys.executable, "-m", "atf_local", "serve", "--aws-port", str(free_port())]
    command += ["--api-port", str(free_port()), "--console-port", "0"]
    process = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # its own group, as a terminal's foreground job is
    )  # fmt: skip
    try:
        if when == "starting":  # as the consumer, its last child, starts: it is still importing
            _wait_for_child(process.pid, b"consumer")
        else:
            _wait_for_line(process, "atf_local credentials")  # the last line serve prints once ready
        os.killpg(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 0 and "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr


def _wait_for_line(process: subprocess.Popen[str], wanted: str) -> None:
    for line in process.stdout or ():
        if wanted in line:
            return
    raise AssertionError(f"serve ended before printing {wanted!r}")


def _wait_for_child(pid: int, mark: bytes, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(mark in _cmdline(child) for child in children_of(pid)):
            return
        time.sleep(0.01)
    raise AssertionError(f"no child of serve with {mark!r} in its command line")


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
