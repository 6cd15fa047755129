"""Debounced flow keys through the public surface: the API (one task, the lambda's own route and a batch), the
sync and async SDK clients, the CLI (--json), and schedulers racing on one key on moto's server. Lambda
"debounced" of the package's stack sets key_limits.debounce (quiet 300 s, at most 600 s)."""

from __future__ import annotations

import json
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from atf_core.aws import make_clients
from atf_core.schema import ScheduleRequest, TaskStatus, to_ms
from atf_core.store.base import CreateResult
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling
from atf_local.stack import LocalStack
from atf_sdk.async_client import AsyncAtfClient
from atf_sdk.client import AtfClient
from tests.api import test_async_client, test_cli

# fixtures of the CLI's and the async client's tests
atf, aclient, anyio_backend = test_cli.atf, test_async_client.aclient, test_async_client.anyio_backend


def fresh_key() -> str:
    return f"cust-{uuid.uuid4().hex[:12]}"


def test_the_api_merges_a_burst_and_says_so(raw: Any, client: AtfClient, item_count: Any) -> None:
    body = {"lambda": "debounced", "flow_key": fresh_key()}
    first = raw("POST", "/v1/tasks", {**body, "payload": {"n": 1}})
    assert first.status == 201 and first.body["created"] and not first.body["debounced"]
    before = item_count()
    merged = raw("POST", "/v1/lambdas/debounced/tasks", {**body, "payload": {"n": 2}})
    assert merged.status == 200 and merged.body["debounced"] and not merged.body["created"]
    assert merged.body["id"] == first.body["id"] and item_count() == before  # no new item
    assert client.get(first.body["id"]).payload == {"n": 2}


def test_a_repeat_of_a_merged_request_answers_the_same(raw: Any) -> None:
    body = {"lambda": "debounced", "flow_key": fresh_key()}
    first = raw("POST", "/v1/tasks", body)
    second = {**body, "payload": {"n": 2}, "key": uuid.uuid4().hex}
    merged = raw("POST", "/v1/tasks", second)
    again = raw("POST", "/v1/tasks", second)
    assert merged.body["debounced"] and merged.body["id"] == first.body["id"]
    assert (again.status, again.body["id"], again.body["debounced"]) == (200, first.body["id"], True)
    reused = raw("POST", "/v1/tasks", {**second, "payload": {"n": 3}})
    assert (reused.status, reused.body["field"]) == (409, "key")


def test_a_batch_merges_its_items_on_one_key(client: AtfClient) -> None:
    flow_key = fresh_key()
    item = {"lambda": "debounced", "flow_key": flow_key}
    results = client.schedule_many([{**item, "payload": {"n": n}} for n in range(3)])
    tasks = [r.task for r in results]
    assert all(t is not None for t in tasks) and len({t.id for t in tasks if t is not None}) == 1
    assert [t.debounced for t in tasks if t is not None] == [False, True, True]  # in the batch's order
    assert client.get(tasks[0].id).payload == {"n": 2}  # type: ignore[union-attr]  # the last one's, as one by one


def test_the_sync_client_says_debounced(client: AtfClient) -> None:
    flow_key = fresh_key()
    first = client.schedule("debounced", flow_key=flow_key, payload={"n": 1})
    second = client.schedule("debounced", flow_key=flow_key, payload={"n": 2})
    assert not first.debounced and second.debounced and second.id == first.id


@pytest.mark.anyio
async def test_the_async_client_says_debounced(aclient: AsyncAtfClient) -> None:
    flow_key = fresh_key()
    first = await aclient.schedule("debounced", flow_key=flow_key)
    second = await aclient.schedule("debounced", flow_key=flow_key, payload={"n": 2})
    assert second.debounced and second.id == first.id


def test_the_cli_shows_a_merge(atf: Any) -> None:
    flow_key = fresh_key()
    code, out, _ = atf("schedule", "debounced", "--flow-key", flow_key, "-q")
    first = out.strip()
    code, out, _ = atf("schedule", "debounced", "--flow-key", flow_key, "--json")
    assert code == 0 and json.loads(out)["debounced"] is True and json.loads(out)["id"] == first
    code, out, _ = atf("schedule", "debounced", "--flow-key", flow_key)
    assert code == 0 and f"merged into {first}" in out
    code, out, _ = atf("stats", "debounced")
    assert code == 0 and "a burst runs once, 300 s after its last task, at most 600 s after its first" in out


RACES = 8  # timing matters: the race runs this often
RACERS = 4


def race(stack: LocalStack, flow_key: str) -> list[CreateResult]:
    """RACERS schedulers, each with its own client, schedule on one key at once."""
    gate = threading.Barrier(RACERS)

    def one(n: int) -> CreateResult:
        scheduling = Scheduling(DynamoTaskStore(make_clients(stack.endpoint).dynamodb, stack.config), stack.config)
        request = ScheduleRequest.model_validate({"lambda": "debounced", "flow_key": flow_key, "payload": {"n": n}})
        gate.wait()
        return scheduling.schedule(request)

    with ThreadPoolExecutor(RACERS) as pool:
        return list(pool.map(one, range(RACERS)))


def test_schedulers_racing_on_one_key_leave_one_pending_task_with_the_last_writes_payload(
    stack: LocalStack, store: DynamoTaskStore
) -> None:
    """On moto's server (its writes atomic, as DynamoDB's): the schedulers race for real."""
    for _ in range(RACES):
        flow_key = fresh_key()
        results = race(stack, flow_key)
        assert len({r.task.id for r in results}) == 1, "a key got two pending tasks"
        assert [r.created for r in results].count(True) == 1
        [task] = store.get_many([results[0].task.id])
        assert task.status is TaskStatus.NEW and store.key_holder("debounced", flow_key) == task.id
        # the last write wins: each answer shows the task as its write left it, the last one the latest run time
        # (to the millisecond, as stored: the creator's answer holds its task as built)
        latest = max(to_ms(r.task.scheduled_at) for r in results)
        assert to_ms(task.scheduled_at) == latest
        assert task.payload in [r.task.payload for r in results if to_ms(r.task.scheduled_at) == latest]
