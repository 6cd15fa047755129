"""The suite's embedded AWS makes conditional writes atomic, as DynamoDB does.

Plain moto checks a condition and applies the write in separate steps, so
racing writers on one item can both win (seen as a heartbeat landing on top
of a task's result); the checker would then report moto's race as the
framework's. Here eight writers race for each of 25 versions of one item:
exactly one may win each round.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from atf_core.aws import make_clients
from atf_local.environment import DUMMY_CREDENTIALS
from atf_local.stack import REPO, free_port, wait_for_port
from tests.conftest import TEST_CONFIG

WRITERS, ROUNDS = 8, 25


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[str]:
    config = tmp_path / "stack.json"
    config.write_text(json.dumps(TEST_CONFIG))
    port = free_port()
    command = [sys.executable, "-m", "atf_local.faults.server", "--config", str(config), "--aws-port", str(port)]
    env = {**os.environ, **DUMMY_CREDENTIALS}
    server = subprocess.Popen(command, cwd=REPO, env=env, start_new_session=True, stdout=subprocess.DEVNULL)
    try:
        wait_for_port(port, timeout_s=60)
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)


def test_racing_conditional_writes_on_one_item_have_one_winner(endpoint: str) -> None:
    table = TEST_CONFIG["table_name"]
    clients = make_clients(endpoint, config=Config(retries={"mode": "standard", "max_attempts": 1}))
    deadline = time.monotonic() + 60
    while table not in clients.dynamodb.list_tables()["TableNames"] and time.monotonic() < deadline:
        time.sleep(0.2)
    clients.dynamodb.put_item(TableName=table, Item={"id": {"S": "race"}, "v": {"N": "0"}})
    wins: Counter[int] = Counter()
    counting = threading.Lock()
    start = threading.Barrier(WRITERS)

    def writer() -> None:
        db = make_clients(endpoint, config=Config(retries={"mode": "standard", "max_attempts": 1})).dynamodb
        for version in range(ROUNDS):
            start.wait()
            try:
                db.update_item(
                    TableName=table, Key={"id": {"S": "race"}}, UpdateExpression="SET v = :next",
                    ConditionExpression="v = :seen",
                    ExpressionAttributeValues={":next": {"N": str(version + 1)}, ":seen": {"N": str(version)}},
                )  # fmt: skip
            except ClientError:
                continue
            with counting:
                wins[version] += 1

    threads = [threading.Thread(target=writer) for _ in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert [wins[v] for v in range(ROUNDS)] == [1] * ROUNDS
