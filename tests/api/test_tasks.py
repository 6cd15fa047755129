"""Scheduling, reading and cancelling one task at a time through the SDK and the raw API."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from atf_core.errors import Conflict, NotFound, UnknownLambda
from atf_core.schema import TaskStatus
from atf_sdk.client import AtfClient
from tests.api.states import advance


def test_a_scheduled_task_reads_back_as_sent(client: AtfClient) -> None:
    run_at = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    scheduled = client.schedule("work", {"to": "ann"}, collection="mail:vip", priority="high", run_at=run_at)
    task = client.get(scheduled.id)
    assert scheduled.created and scheduled.status is TaskStatus.NEW and scheduled.run_at == run_at
    assert (task.lambda_, task.collection, task.priority, task.payload) == ("work", "mail:vip", "high", {"to": "ann"})
    assert (task.status, task.attempt, task.max_attempts, task.scheduled_at) == (TaskStatus.NEW, 0, 3, run_at)
    assert task.key == scheduled.key and task.key, "the SDK gives every task a key"


def test_expire_at_is_kept_on_the_task(client: AtfClient) -> None:
    expire_at = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=2)
    task = client.get(client.schedule("work", delay_seconds=60, expire_at=expire_at).id)
    assert task.expire_at == expire_at


def test_a_tasks_own_time_limit_is_kept_on_the_task(client: AtfClient) -> None:
    assert client.get(client.schedule("work", delay_seconds=60, timeout_seconds=2.5).id).timeout_seconds == 2.5
    assert client.get(client.schedule("work", delay_seconds=60).id).timeout_seconds is None  # the lambda's


def test_a_flow_key_is_kept_on_the_task_apart_from_the_idempotency_key(client: AtfClient) -> None:
    scheduled = client.schedule("work", delay_seconds=60, flow_key="customer-42", key="flow-key-1")
    task = client.get(scheduled.id)
    assert (task.flow_key, task.key) == ("customer-42", "flow-key-1")
    assert client.get(client.schedule("work", delay_seconds=60).id).flow_key is None


def test_a_bad_flow_key_is_refused_naming_it_and_writes_nothing(raw: Any, item_count: Any) -> None:
    before = item_count()
    refused = raw("POST", "/v1/tasks", {"lambda": "work", "flow_key": "no spaces"})
    assert (refused.status, refused.body["field"]) == (400, "flow_key")
    assert item_count() == before


def test_defaults_come_from_the_lambda_spec(client: AtfClient) -> None:
    task = client.get(client.schedule("mail").id)
    assert (task.priority, task.max_attempts, task.collection, task.payload) == ("normal", 5, "default", {})


def test_same_key_same_body_returns_the_task_and_different_body_conflicts(raw: Any, item_count: Any) -> None:
    body = {"lambda": "work", "payload": {"n": 1}, "key": "order-1", "delay_seconds": 60}
    first = raw("POST", "/v1/tasks", body)
    again = raw("POST", "/v1/tasks", body)
    assert (first.status, again.status) == (201, 200)
    assert again.body == {**first.body, "created": False}
    before = item_count()
    clash = raw("POST", "/v1/tasks", {**body, "payload": {"n": 2}})
    assert (clash.status, clash.body["code"], clash.body["field"]) == (409, "conflict", "key")
    assert item_count() == before


@pytest.mark.parametrize("first_explicit", [False, True])
def test_a_default_given_or_left_out_is_the_same_request(raw: Any, item_count: Any, first_explicit: bool) -> None:
    # Given a request with a key that leaves out the priority and max_attempts (work's: normal, 3)
    left_out = {"lambda": "work", "payload": {"n": 1}, "key": f"defaults-{uuid.uuid4().hex}", "delay_seconds": 60}
    given = {**left_out, "priority": "normal", "max_attempts": 3}
    first = raw("POST", "/v1/tasks", given if first_explicit else left_out)
    # When it is repeated naming the lambda's defaults (or the other way round)
    again = raw("POST", "/v1/tasks", left_out if first_explicit else given)
    # Then it is the same request: the same task, not a conflict
    assert (first.status, again.status) == (201, 200), again.body
    assert again.body == {**first.body, "created": False}
    # And another priority or budget still conflicts, writing nothing
    before = item_count()
    for other in ({"priority": "high"}, {"max_attempts": 4}):
        clash = raw("POST", "/v1/tasks", {**given, **other})
        assert (clash.status, clash.body["field"]) == (409, "key"), clash.body
    assert item_count() == before


def test_without_a_key_the_api_makes_a_new_task_each_time(raw: Any) -> None:
    body = {"lambda": "work"}
    assert raw("POST", "/v1/tasks", body).body["id"] != raw("POST", "/v1/tasks", body).body["id"]


def test_sdk_errors_are_the_core_error_classes(client: AtfClient) -> None:
    with pytest.raises(UnknownLambda) as unknown:
        client.schedule("nope")
    assert (unknown.value.status, unknown.value.field) == (400, "lambda")
    with pytest.raises(NotFound):
        client.get("f" * 32)
    client.schedule("work", {"v": 1}, key="sdk-conflict")
    with pytest.raises(Conflict):
        client.schedule("work", {"v": 2}, key="sdk-conflict")


@pytest.mark.parametrize("status", [TaskStatus.NEW, TaskStatus.ENQUEUED])
def test_a_task_not_started_can_be_cancelled_twice(client: AtfClient, store: Any, status: TaskStatus) -> None:
    task_id = client.schedule("work", delay_seconds=3600).id
    if status is not TaskStatus.NEW:
        advance(store, task_id, status)
    cancelled = client.cancel(task_id)
    assert cancelled.status is TaskStatus.CANCELLED and cancelled.finished_at is not None
    assert client.cancel(task_id).status is TaskStatus.CANCELLED
    assert client.get(task_id).status is TaskStatus.CANCELLED


@pytest.mark.parametrize("status", [TaskStatus.CLAIMED, TaskStatus.PROCESSING, TaskStatus.SUCCESS])
def test_a_started_or_finished_task_cannot_be_cancelled(
    client: AtfClient, raw: Any, store: Any, status: TaskStatus
) -> None:
    task_id = client.schedule("work", delay_seconds=3600).id
    advance(store, task_id, status)
    reply = raw("DELETE", f"/v1/tasks/{task_id}")
    assert (reply.status, reply.body["code"], reply.body["field"]) == (409, "conflict", "id")
    assert status.value in reply.body["message"]
    assert client.get(task_id).status is status


def test_wait_gives_the_task_once_settled_and_times_out_before(client: AtfClient) -> None:
    pending = client.schedule("work", delay_seconds=600)
    with pytest.raises(TimeoutError, match=f"task {pending.id} is still new after 0.3 s"):
        client.wait(pending.id, timeout_s=0.3, poll_s=0.1)
    client.cancel(pending.id)
    assert client.wait(pending.id, timeout_s=5).status is TaskStatus.CANCELLED
