"""A live local stack for the API tests that need tasks to run: `python -m atf_local serve`
(moto, the API and a consumer, which also fires schedules and sweeps chains) and a worker
host for tests.api.lambdas, each a process of its own, on free loopback ports.

Package-scoped and started only by the tests that ask for it; stopped with SIGINT and
SIGTERM, the way an operator stops them, and killed if they do not stop in time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from atf_core.config import StackConfig
from atf_local.environment import REPO, local_environment
from atf_local.iam.accounts import credentials
from atf_local.iam.roles import WORKER
from atf_local.iam.template import template_for
from atf_local.stack import free_port, wait_for_port
from atf_sdk.client import AtfClient, RetryPolicy

LIVE_CONFIG = {
    "name": "atf-live",
    "table_name": "atf-live-tasks",
    "shards": 1,
    "poll_interval": 0.25,
    "lookahead": 0.5,
    "timeouts": {
        "enqueue": 15,
        "claim": 10,
        "heartbeat_interval": 1,
        "heartbeat": 10,
        "backoff_base": 0.2,
        "backoff_max": 0.5,
    },
    "lambdas": {
        "flaky": {"priorities": ["high", "normal"], "default_priority": "normal", "max_attempts": 2},
        "step": {"priorities": ["normal"], "default_priority": "normal", "max_attempts": 2},
        "tick": {"priorities": ["normal"], "default_priority": "normal", "max_attempts": 2},
    },
}
T = TypeVar("T")


@dataclass
class LiveStack:
    api_url: str
    client: AtfClient

    def wait_for(self, read: Callable[[], T], done: Callable[[T], bool], timeout_s: float = 15) -> T:
        """Read until done(value), polling through the API; fail with the last value seen."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = read()
            if done(value):
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout_s}s; last seen: {value!r}")
            time.sleep(0.2)


def _stop(processes: list[tuple[subprocess.Popen[bytes], int]]) -> None:
    """Signal every process at once (each stops in a few seconds), kill any that outstays 20 s."""
    for process, sig in processes:
        if process.poll() is None:
            process.send_signal(sig)
    for process, _ in processes:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _warm_up(live: LiveStack) -> None:
    """One task per lambda run to success, so the tests' own timings exclude starting executors."""
    ids = [live.client.schedule(name, collection="warm-up").id for name in LIVE_CONFIG["lambdas"]]
    for task_id in ids:
        live.wait_for(lambda i=task_id: live.client.get(i).status.value, lambda s: s == "success", timeout_s=90)


@pytest.fixture(scope="package")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveStack]:
    path: Path = tmp_path_factory.mktemp("live") / "stack.json"
    path.write_text(json.dumps(LIVE_CONFIG))
    template_for(StackConfig.model_validate(LIVE_CONFIG))  # a first synthesis before the wait for the stack
    aws_port, api_port = free_port(), free_port()
    env = {
        **local_environment(f"http://127.0.0.1:{aws_port}", path.read_text()),
        "PYTHONPATH": f"{REPO}:{REPO / 'local'}",
    }
    serve = [sys.executable, "-m", "atf_local", "serve", "--config", str(path)]
    serve += ["--aws-port", str(aws_port), "--api-port", str(api_port)]
    log = (path.parent / "processes.log").open("wb")  # kept beside the config for a failed run
    stack = subprocess.Popen(serve, cwd=REPO, env=env, start_new_session=True, stdout=log, stderr=log)
    worker = None
    try:
        wait_for_port(api_port, timeout_s=60)  # the API starts once the table and queues exist
        host = [sys.executable, "-m", "atf_sdk.cli", "worker", "tests.api.lambdas:lambdas", "--config", str(path)]
        host += ["--executors", "1", "--threads", "2", "--receive-wait", "1"]
        host_env = {**env, **credentials(f"http://127.0.0.1:{aws_port}", WORKER)}
        worker = subprocess.Popen(host, cwd=REPO, env=host_env, start_new_session=True, stdout=log, stderr=log)
        url = f"http://127.0.0.1:{api_port}"
        with AtfClient(url, region="us-east-1", retry=RetryPolicy(attempts=3, base_s=0.05)) as client:
            live = LiveStack(url, client)
            _warm_up(live)
            yield live
    finally:
        hosts = [(worker, signal.SIGTERM)] if worker is not None else []
        _stop([*hosts, (stack, signal.SIGINT)])
        log.close()
