"""The local stack in its own process (moto's server on loopback, the consumer),
and worker hosts as separate processes, the way they run for real."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from atf_core.aws import AwsClients, make_clients
from atf_core.config import StackConfig
from atf_core.definitions import queue_specs
from atf_core.schema import Task
from atf_core.store.tasks import DynamoTaskStore
from atf_local.environment import REPO, component_environment
from atf_local.iam.accounts import operator_session
from atf_local.iam.roles import WORKER
from atf_local.iam.template import template_for
from atf_local.stack import free_port, wait_for_port
from tests.conftest import TEST_CONFIG, interrupt_stack


@dataclass
class RunningStack:
    endpoint: str
    config: StackConfig
    config_path: Path
    clients: AwsClients
    store: DynamoTaskStore

    def env(self, component: str = WORKER) -> dict[str, str]:
        """The environment of a `component`'s process (a worker host's by default): its role's credentials."""
        return component_environment(self.endpoint, self.config.model_dump_json(), component)

    def wait_for(self, task_ids: list[str], done: Callable[[Task], bool], timeout_s: float = 30) -> list[Task]:
        deadline = time.monotonic() + timeout_s
        while True:
            tasks = [self.store.get(i) for i in task_ids]
            if all(t is not None and done(t) for t in tasks):
                return [t for t in tasks if t is not None]
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; states: {[(t.id[:8], t.status.value) for t in tasks if t]}")
            time.sleep(0.2)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    with running_stack(TEST_CONFIG, tmp_path_factory) as running:
        yield running


@contextlib.contextmanager
def running_stack(raw_config: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """The local stack of that configuration, until the block ends."""
    config = StackConfig.model_validate(raw_config)
    path = tmp_path_factory.mktemp("stack") / "stack.json"
    path.write_text(json.dumps(raw_config))
    template_for(config)  # a first synthesis (tens of seconds) before the wait for the stack starts
    port = free_port()
    command = [sys.executable, "-m", "atf_local", "serve", "--config", str(path), "--aws-port", str(port)]
    command += ["--api-port", "0", "--console-port", "0"]  # these tests use neither
    environment = {**os.environ, "PYTHONPATH": f"{REPO}:{REPO / 'local'}"}
    process = subprocess.Popen(command, cwd=REPO, env=environment, start_new_session=True)  # a group to kill
    try:
        wait_for_port(port, timeout_s=120, alive=process)  # as long as the stack waits for its SQS server
        endpoint = f"http://127.0.0.1:{port}"
        clients = make_clients(endpoint, session=operator_session())
        _wait_for_table(clients, config, process)
        yield RunningStack(endpoint, config, path, clients, DynamoTaskStore(clients.dynamodb, config))
    finally:
        interrupt_stack(process)


def _wait_for_table(clients: AwsClients, config: StackConfig, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:  # its output, above, says why
            raise RuntimeError(f"the local stack exited ({process.returncode}) before it provisioned its queues")
        queues = clients.sqs.list_queues().get("QueueUrls", [])
        if len(queues) >= 2 * len(queue_specs(config)):  # every queue and its dead-letter queue: provisioned
            return
        time.sleep(0.2)
    raise TimeoutError("the local stack did not provision its queues")


@pytest.fixture
def worker_host(stack: RunningStack) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []

    def start(
        executors: int = 1,
        threads: int = 2,
        receive_wait: int = 1,
        log: Path | None = None,
        lambdas: str = "tests.e2e.lambdas:lambdas",
        **env: str,
    ) -> subprocess.Popen[bytes]:
        """A worker host running `lambdas` (`env` added to its environment); with a `log` (one per host) its
        output goes there and this waits until it is ready."""
        command = [
            sys.executable, "-m", "atf_sdk.cli", "worker", lambdas,
            "--config", str(stack.config_path), "--executors", str(executors), "--threads", str(threads),
            "--receive-wait", str(receive_wait),
        ]  # fmt: skip
        with contextlib.ExitStack() as files:
            out = files.enter_context(log.open("wb")) if log is not None else None
            err = subprocess.STDOUT if out is not None else None
            environment = {**stack.env(), **env}
            host = subprocess.Popen(command, cwd=REPO, env=environment, start_new_session=True, stdout=out, stderr=err)
        started.append(host)
        if log is not None:
            wait_for_line(log, "worker host ready", host)
        return host

    yield start
    for host in started:
        if host.poll() is None:
            host.send_signal(signal.SIGTERM)
    for host in started:
        try:
            host.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(host.pid, signal.SIGKILL)


def wait_for_line(log: Path, needle: str, process: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while needle not in log.read_text(errors="replace"):
        assert process.poll() is None, f"the process ended ({process.returncode}): {log.read_text()[-2000:]}"
        assert time.monotonic() < deadline, f"{needle!r} never appeared in {log}"
        time.sleep(0.05)
