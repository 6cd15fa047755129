"""The local stack, and a worker host for a team's lambdas, for integration tests: each a process of its own.

    with local_stack(config, tmp_dir) as stack, worker_host(stack, "shop.lambdas:lambdas"):
        with stack.client() as atf:
            atf.wait(atf.schedule("charge", {"order": 7}).id)

The stack is `python -m atf_local serve` (moto's server with the table and queues, the consumer and
the frontend API) on free loopback ports; the worker host is `atf worker`. They run in processes of
their own so that nothing of them is shared with the tests' process: moto's in-process state (which a
unit test's `mock_aws` resets), the environment, signal handlers. Both are stopped as an operator stops
them (SIGINT, SIGTERM), and killed if they outstay STOP_TIMEOUT_S. They need atf-local, which brings
moto: `pip install 'atf-sdk[testing]'`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3

from atf_core.config import StackConfig
from atf_sdk.client import AtfClient
from atf_sdk.transport import API_URL_ENV, RetryPolicy

if TYPE_CHECKING:
    from atf_sdk.async_client import AsyncAtfClient

READY_TIMEOUT_S = 120.0  # a stack starts in seconds; a loaded machine may take much longer
STOP_TIMEOUT_S = 20.0
STACK_READY = "ATF local stack ready"
WORKER_READY = "worker host ready"
REGION = "us-east-1"
TEST_RETRIES = RetryPolicy(attempts=3, base_s=0.05)


@dataclass(frozen=True)
class RunningStack:
    """A local stack serving `config`: its API, its embedded AWS, and the directory of its files and logs."""

    config: StackConfig
    api_url: str
    aws_endpoint: str
    directory: Path

    @property
    def config_file(self) -> Path:
        return self.directory / "stack.json"

    def environment(self) -> dict[str, str]:
        """The variables a process uses this stack with (a worker host, `atf`, AtfClient.from_env)."""
        from atf_local.environment import local_environment

        return {**local_environment(self.aws_endpoint, self.config.model_dump_json()), API_URL_ENV: self.api_url}

    def client(self, **options: Any) -> AtfClient:
        """An AtfClient of this stack's API (options as AtfClient takes them; quick retries by default)."""
        return AtfClient(self.api_url, **_client_options(options))

    def async_client(self, **options: Any) -> AsyncAtfClient:
        """An AsyncAtfClient of this stack's API; needs `atf-sdk[async]`."""
        from atf_sdk.async_client import AsyncAtfClient

        return AsyncAtfClient(self.api_url, **_client_options(options))


@dataclass(frozen=True)
class RunningWorker:
    lambdas: str  # module:attribute of the Lambdas it runs
    pid: int
    log: Path  # its JSON log lines, the callbacks' own included


@contextlib.contextmanager
def local_stack(config: StackConfig, directory: Path) -> Iterator[RunningStack]:
    """Serve `config` on free loopback ports until the block ends; `directory` keeps its files and logs."""
    directory.mkdir(parents=True, exist_ok=True)
    aws_port, api_port = _free_port(), _free_port()
    stack = RunningStack(config, f"http://127.0.0.1:{api_port}", f"http://127.0.0.1:{aws_port}", directory)
    stack.config_file.write_text(config.model_dump_json(by_alias=True, indent=2))
    command = [sys.executable, "-m", "atf_local", "serve", "--config", str(stack.config_file)]
    command += ["--aws-port", str(aws_port), "--api-port", str(api_port), "--console-port", "0"]
    log = directory / "stack.log"
    with _process("the local stack", command, stack.environment(), directory, log, STACK_READY, signal.SIGINT):
        yield stack


@contextlib.contextmanager
def worker_host(
    stack: RunningStack, lambdas: str, *, cwd: Path | None = None, executors: int = 1, threads: int = 2
) -> Iterator[RunningWorker]:
    """A worker host for `lambdas` ("module:attribute") on the stack until the block ends. It imports
    the module from `cwd` (default: the current directory) or from anywhere this process imports from."""
    command = [sys.executable, "-m", "atf_sdk.cli", "worker", lambdas, "--config", str(stack.config_file)]
    command += ["--executors", str(executors), "--threads", str(threads), "--receive-wait", "1"]
    ours = [p for p in sys.path if p and not p.startswith((sys.prefix, sys.base_prefix))]
    env = {**stack.environment(), "PYTHONPATH": os.pathsep.join(ours)}
    descriptor, name = tempfile.mkstemp(prefix="worker-", suffix=".log", dir=stack.directory)
    os.close(descriptor)
    log = Path(name)
    with _process("the worker host", command, env, cwd or Path.cwd(), log, WORKER_READY, signal.SIGTERM) as process:
        yield RunningWorker(lambdas, process.pid, log)


@contextlib.contextmanager
def _process(
    name: str, command: list[str], env: dict[str, str], cwd: Path, log: Path, ready: str, stop: signal.Signals
) -> Iterator[subprocess.Popen[bytes]]:
    """Run `command`, its output in `log`, until it has logged `ready`; stop it with `stop` after."""
    with _terminate_as_interrupt(), log.open("wb") as out:
        environment = {**env, "PYTHONUNBUFFERED": "1"}
        process = subprocess.Popen(
            command, cwd=cwd, env=environment, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            _wait_until_ready(name, process, log, ready)
            yield process
        finally:
            _stop(process, stop)


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """While the process runs, SIGTERM to this one (a CI job's timeout, an editor's stop button) unwinds as
    Ctrl-C does, so the blocks that started it stop it: it runs in a session of its own, which no signal to
    this process reaches, and the default action would end this one at once and leave it running. Only
    where SIGTERM has no handler of the caller's own, and in the main thread (Python's signals' rule)."""
    ours = threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    if not ours:
        yield
        return
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _interrupt(signum: int, _: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut the stopping short
    raise KeyboardInterrupt(f"stopped by signal {signum}")


def _wait_until_ready(name: str, process: subprocess.Popen[bytes], log: Path, ready: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while ready not in log.read_text(errors="replace"):
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode} before it was ready:\n{_tail(log)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} was not ready after {READY_TIMEOUT_S:g} s:\n{_tail(log)}")
        time.sleep(0.1)


def _stop(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    if process.poll() is None:
        process.send_signal(sig)
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # its session: the executors or the consumer with it
        process.wait()


def _tail(log: Path, lines: int = 30) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) + f"\n(the whole log: {log})"


def _client_options(options: dict[str, Any]) -> dict[str, Any]:
    # The local API checks that a request is signed, not by whom: dummy credentials, whatever the machine has.
    session = boto3.Session(aws_access_key_id="local", aws_secret_access_key="local", region_name=REGION)
    return {"session": session, "retry": TEST_RETRIES, **options}


def _free_port() -> int:
    try:
        from atf_local.stack import free_port
    except ImportError as missing:
        raise ImportError(f"the local stack needs atf-local ({missing}): pip install 'atf-sdk[testing]'") from None
    return free_port()
