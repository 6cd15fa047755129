"""The suite's embedded AWS (moto's server with atomic conditional writes) in its own process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from atf_core.aws import make_clients
from atf_local.environment import DUMMY_CREDENTIALS, REPO
from atf_local.stack import free_port, wait_for_port
from tests.conftest import TEST_CONFIG


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One server for a module's tests (each starts one in 3-4 s): they write items and queues of their own."""
    config = tmp_path_factory.mktemp("endpoint") / "stack.json"
    config.write_text(json.dumps(TEST_CONFIG))
    port = free_port()
    command = [sys.executable, "-m", "atf_local.faults.server", "--config", str(config), "--aws-port", str(port)]
    env = {**os.environ, **DUMMY_CREDENTIALS}
    server = subprocess.Popen(command, cwd=REPO, env=env, start_new_session=True, stdout=subprocess.DEVNULL)
    try:
        wait_for_port(port, timeout_s=60)
        _wait_for_table(f"http://127.0.0.1:{port}")
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)


def _wait_for_table(endpoint: str) -> None:
    tables = make_clients(endpoint).dynamodb
    deadline = time.monotonic() + 60
    while TEST_CONFIG["table_name"] not in tables.list_tables()["TableNames"]:
        if time.monotonic() > deadline:
            raise TimeoutError("the embedded AWS did not create its table")
        time.sleep(0.2)
