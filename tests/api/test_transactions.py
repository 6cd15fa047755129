"""A task scheduled in a transaction (atf_sdk.transaction) is one like any other through the API and the CLI,
and its idempotency key is the one the API's keys are: either path finds the task the other made."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from botocore.exceptions import ClientError

from atf_core.aws import make_clients
from atf_core.schema import TaskStatus
from atf_local.stack import LocalStack
from atf_sdk.cli import main
from atf_sdk.client import AtfClient
from atf_sdk.transaction import task_entries


@pytest.fixture(scope="module")
def dynamodb(stack: LocalStack) -> Any:
    return make_clients(stack.endpoint).dynamodb


def test_a_transaction_task_is_seen_by_the_api_and_the_cli_and_its_key_by_the_api(
    stack: LocalStack, client: AtfClient, dynamodb: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    key = f"tx-{uuid.uuid4().hex[:8]}"
    request = {"lambda": "work", "payload": {"to": "ann"}, "key": key, "delay_seconds": 600, "priority": "high"}
    scheduled = task_entries(stack.config, request)
    dynamodb.transact_write_items(TransactItems=scheduled.entries)
    # The API reads it as it would a task it made
    task = client.get(scheduled.task.id)
    assert (task.status, task.lambda_, task.priority, task.payload, task.key) == (
        TaskStatus.NEW, "work", "high", {"to": "ann"}, key,
    )  # fmt: skip
    assert task.max_attempts == 3 and task.scheduled_at == scheduled.task.scheduled_at
    with pytest.raises(SystemExit) as exited:
        main(["status", "--api-url", stack.api_url, scheduled.task.id, "--json"])
    assert exited.value.code in (0, None)
    assert [(t["id"], t["status"]) for t in json.loads(capsys.readouterr().out)] == [(scheduled.task.id, "new")]
    # The same request through the API finds it (200, not created); a different one is a conflict
    again = client.schedule("work", {"to": "ann"}, key=key, delay_seconds=600, priority="high")
    assert (again.id, again.created) == (scheduled.task.id, False)


def test_a_key_the_api_used_cancels_the_transaction_naming_the_task(
    stack: LocalStack, client: AtfClient, dynamodb: Any
) -> None:
    key = f"tx-{uuid.uuid4().hex[:8]}"
    made = client.schedule("work", {"to": "bo"}, key=key, delay_seconds=600)
    scheduled = task_entries(
        stack.config, {"lambda": "work", "payload": {"to": "bo"}, "key": key, "delay_seconds": 600}
    )
    assert scheduled.task.id == made.id
    with pytest.raises(ClientError) as refused:
        dynamodb.transact_write_items(TransactItems=scheduled.entries)
    existing = scheduled.existing(refused.value, scheduled.entries)
    assert existing is not None and (existing.task.id, existing.created, existing.conflict) == (made.id, False, False)
