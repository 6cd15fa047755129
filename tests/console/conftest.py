"""The local stack with its console, a worker host, and headless Chromium driven by Playwright.

Chromium is Debian's (`make chromium` installs it); Playwright only drives it,
and never downloads a browser of its own. Everything listens on loopback.
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
from typing import Any

import pytest

from atf_core.aws import make_clients
from atf_core.config import StackConfig
from atf_core.schema import Task
from atf_core.store.tasks import DynamoTaskStore
from atf_local.environment import REPO, local_environment
from atf_local.stack import free_port, wait_for_port
from atf_sdk.client import AtfClient, RetryPolicy

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip
CONSOLE_CONFIG = {
    "name": "atf-console",
    "table_name": "atf-console-tasks",
    "shards": 2,
    "poll_interval": 0.5,
    "lookahead": 0.5,
    "timeouts": {"enqueue": 15, "claim": 10, "heartbeat_interval": 1, "heartbeat": 10, "backoff_base": 0.2},
    "lambdas": {
        "work": {"priorities": ["high", "normal", "low"], "default_priority": "normal", "max_attempts": 3},
        "mail": {"priorities": ["normal"], "default_priority": "normal", "max_attempts": 3},
    },
}


@dataclass
class ConsoleStack:
    console: str
    api: str
    config: StackConfig
    store: DynamoTaskStore
    client: AtfClient
    env: dict[str, str]

    def wait_for(self, ids: list[str], done: Callable[[Task], bool], timeout_s: float = 30) -> list[Task]:
        deadline = time.monotonic() + timeout_s
        while True:
            tasks = [self.store.get(i) for i in ids]
            if all(t is not None and done(t) for t in tasks):
                return [t for t in tasks if t is not None]
            assert time.monotonic() < deadline, f"timed out: {[t.status.value for t in tasks if t]}"
            time.sleep(0.2)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT if "serve" in process.args else signal.SIGTERM)  # type: ignore[operator]
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)


def _wait_for_line(log: Path, needle: str, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while needle not in log.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"{needle!r} never appeared in {log}"
        time.sleep(0.1)


@pytest.fixture(scope="package")
def console_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleStack]:
    root = tmp_path_factory.mktemp("console")
    config_path = root / "stack.json"
    config_path.write_text(json.dumps(CONSOLE_CONFIG))
    config = StackConfig.model_validate(CONSOLE_CONFIG)
    aws, api, console = free_port(), free_port(), free_port()
    serve = [
        sys.executable, "-m", "atf_local", "serve", "--config", str(config_path),
        "--aws-port", str(aws), "--api-port", str(api), "--console-port", str(console),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": f"{REPO}:{REPO / 'local'}"}
    with (root / "stack.log").open("wb") as log:
        stack = subprocess.Popen(serve, cwd=REPO, env=env, stdout=log, stderr=log, start_new_session=True)
    host_log = root / "host.log"
    processes = [stack]
    try:
        wait_for_port(console, timeout_s=120)
        endpoint = f"http://127.0.0.1:{aws}"
        host_env = local_environment(endpoint, config.model_dump_json())
        processes.append(_start_host(config_path, host_env, host_log))
        _wait_for_line(host_log, "worker host ready")
        client = AtfClient(f"http://127.0.0.1:{api}", region="us-east-1", retry=RetryPolicy(attempts=3, base_s=0.05))
        store = DynamoTaskStore(make_clients(endpoint).dynamodb, config)
        yield ConsoleStack(f"http://127.0.0.1:{console}", client.endpoint, config, store, client, host_env)
    finally:
        for process in reversed(processes):
            _stop(process)


def _start_host(config_path: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    command = [
        sys.executable, "-m", "atf_sdk.cli", "worker", "tests.console.lambdas:lambdas",
        "--config", str(config_path), "--executors", "1", "--threads", "4", "--receive-wait", "1",
    ]  # fmt: skip
    with log.open("wb") as out:
        return subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=out, start_new_session=True)


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), "Debian's chromium is missing: run `make chromium`"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(15_000)
    yield opened
    context.close()
