"""`schedule_many`'s batches: in order, at most 100 tasks, and each body within what a Lambda event holds."""

from __future__ import annotations

import json

from atf_core.api import MAX_BATCH, MAX_EVENT_BODY_BYTES, in_an_event
from atf_core.schema import ScheduleRequest
from atf_sdk.operations import _batches, _wire


def batches_of(payloads: list[dict[str, object]]) -> list[tuple[int, list[ScheduleRequest]]]:
    tasks = [ScheduleRequest.model_validate({"lambda": "work", "payload": p}) for p in payloads]
    batches = list(_batches(tasks))
    assert [task for _, batch in batches for task in batch] == tasks  # every task once, in order
    assert [start for start, _ in batches] == [sum(len(b) for _, b in batches[:i]) for i in range(len(batches))]
    return batches


def body_bytes(batch: list[ScheduleRequest]) -> int:
    return in_an_event(json.dumps({"tasks": [_wire(task) for task in batch]}))  # as the transport sends it


def test_small_tasks_go_in_hundreds() -> None:
    batches = batches_of([{"n": n} for n in range(250)])
    assert [len(batch) for _, batch in batches] == [100, 100, 50]


def test_large_tasks_go_in_batches_whose_bodies_fit_an_event() -> None:
    # Given tasks of ~120 KB each in their event (quotes, escaped twice): 100 would be ~12 MB
    batches = batches_of([{"n": n, "x": '"' * 30_000} for n in range(100)])
    assert len(batches) > 1
    assert all(len(batch) <= MAX_BATCH and body_bytes(batch) <= MAX_EVENT_BODY_BYTES for _, batch in batches)


def test_no_tasks_no_batch() -> None:
    assert batches_of([]) == []
