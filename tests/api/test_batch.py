"""POST /v1/tasks/batch and the SDK's schedule_many: a result per task, in order."""

from __future__ import annotations

from typing import Any

import pytest

from atf_core.errors import AtfError, Conflict, UnknownLambda, UnknownPriority
from atf_core.schema import ScheduleRequest
from atf_sdk.client import AtfClient


def test_each_item_gets_its_own_outcome(raw: Any, item_count: Any) -> None:
    raw("POST", "/v1/tasks", {"lambda": "work", "key": "batch-old"})
    raw("POST", "/v1/tasks", {"lambda": "work", "key": "batch-taken", "payload": {"v": 1}})
    before = item_count()
    tasks = [  # work's defaults: priority normal, max_attempts 3; named or left out, the request is the same
        {"lambda": "work", "key": "batch-new"},
        {"lambda": "work", "key": "batch-old", "priority": "normal"},
        {"lambda": "work", "key": "batch-taken", "payload": {"v": 2}},
        {"lambda": "work", "key": "batch-new", "max_attempts": 3},
    ]
    results = raw("POST", "/v1/tasks/batch", {"tasks": tasks}).body["results"]
    assert [(r["index"], r["status"]) for r in results] == [(0, 201), (1, 200), (2, 409), (3, 200)]
    assert results[2]["error"]["code"] == "conflict" and results[2]["task"] is None
    assert results[3]["task"]["id"] == results[0]["task"]["id"] and not results[3]["task"]["created"]
    assert item_count() == before + 1


def test_schedule_many_sends_batches_of_100_and_reports_progress(client: AtfClient) -> None:
    requests = [ScheduleRequest.model_validate({"lambda": "mail", "payload": {"i": i}}) for i in range(130)]
    progress: list[int] = []
    results = client.schedule_many(requests, on_progress=progress.append)
    assert progress == [100, 30]
    assert [r.index for r in results] == list(range(130))
    assert all(r.status == 201 and r.task and r.task.key for r in results)
    assert client.get(results[129].task.id).payload == {"i": 129}  # type: ignore[union-attr]
    keyed = [requests[i].model_copy(update={"key": results[i].task.key}) for i in range(130)]  # type: ignore[union-attr]
    again = client.schedule_many(keyed)
    assert {r.status for r in again} == {200}, "resending with the same keys schedules nothing twice"


@pytest.mark.parametrize(
    ("bad", "refusal", "field"),
    [
        ({"lambda": "nope"}, UnknownLambda, "lambda"),
        ({"lambda": "work", "priority": "zzz"}, UnknownPriority, "priority"),
    ],
)
def test_a_task_the_api_refuses_in_a_later_batch_is_named_and_nothing_is_written(
    client: AtfClient, item_count: Any, bad: dict[str, Any], refusal: type[AtfError], field: str
) -> None:
    # Given 250 tasks, three batches, of which the API alone can tell the 210th is wrong
    requests: list[dict[str, Any]] = [{"lambda": "work", "delay_seconds": 600} for _ in range(250)]
    requests[210] = bad
    before = item_count()
    # When they are scheduled
    with pytest.raises(refusal) as refused:
        client.schedule_many(requests)
    # Then the error names it by its index in the caller's list, and not one task was written
    assert refused.value.field == f"tasks[210].{field}"
    assert item_count() == before


def test_a_key_reused_differently_in_two_batches_is_refused_and_nothing_is_written(
    client: AtfClient, item_count: Any
) -> None:
    # Given 150 tasks, two batches, where the 51st and the 121st use one key with different payloads
    requests: list[dict[str, Any]] = [{"lambda": "work", "delay_seconds": 600} for _ in range(150)]
    requests[50] = {"lambda": "work", "key": "across-batches", "payload": {"v": 1}}
    requests[120] = {"lambda": "work", "key": "across-batches", "payload": {"v": 2}}
    before = item_count()
    # When they are scheduled
    with pytest.raises(Conflict) as refused:
        client.schedule_many(requests)
    # Then the conflict names both by their index in the caller's list, and not one task was written
    assert refused.value.field == "tasks[120].key"
    assert "tasks[50] and tasks[120] use key 'across-batches'" in refused.value.message
    assert item_count() == before


def test_a_key_reused_alike_in_two_batches_is_one_task(client: AtfClient) -> None:
    # Given 150 tasks where two in different batches are the same request, one naming the lambda's default
    requests: list[dict[str, Any]] = [{"lambda": "work", "delay_seconds": 600} for _ in range(150)]
    requests[10] = {"lambda": "work", "key": "alike-across-batches", "delay_seconds": 600}
    requests[140] = {**requests[10], "priority": "normal"}
    # When they are scheduled; Then both are answered with the one task
    results = client.schedule_many(requests)
    assert results[140].task and results[10].task and results[140].task.id == results[10].task.id
    assert (results[10].status, results[140].status) == (201, 200)


def test_a_key_reused_within_a_later_batch_is_named_by_the_callers_indices(client: AtfClient, item_count: Any) -> None:
    # Given 150 tasks where the 131st and 141st, both in the second batch, use one key differently
    requests: list[dict[str, Any]] = [{"lambda": "work", "delay_seconds": 600} for _ in range(150)]
    requests[130] = {"lambda": "work", "key": "within-a-batch", "payload": {"v": 1}}
    requests[140] = {"lambda": "work", "key": "within-a-batch", "payload": {"v": 2}}
    before = item_count()
    # When they are scheduled; Then the field and the message both count from the caller's first task
    with pytest.raises(Conflict) as refused:
        client.schedule_many(requests)
    assert refused.value.field == "tasks[140].key"
    assert "tasks[130] and tasks[140]" in refused.value.message
    assert item_count() == before


def test_a_dry_run_checks_a_batch_as_the_write_would_and_writes_nothing(raw: Any, item_count: Any) -> None:
    before = item_count()
    tasks = [{"lambda": "work", "key": "dry-1"}, {"lambda": "work", "priority": "zzz"}]
    refused = raw("POST", "/v1/tasks/batch", {"tasks": tasks, "dry_run": True})
    assert (refused.status, refused.body["field"]) == (400, "tasks[1].priority")
    checked = raw("POST", "/v1/tasks/batch", {"tasks": tasks[:1], "dry_run": True})
    assert (checked.status, checked.body) == (200, {"results": []})
    assert item_count() == before


def test_batch_items_carry_their_flow_keys(client: AtfClient) -> None:
    results = client.schedule_many([{"lambda": "work", "delay_seconds": 600, "flow_key": k} for k in ("a", "b")])
    assert [client.get(r.task.id).flow_key for r in results if r.task] == ["a", "b"]
