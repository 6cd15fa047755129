"""A task's item stays within DynamoDB's 400 KB however its attempts go (moto refuses a larger item, as
DynamoDB does): a payload at its limit, attempt after attempt failing with the longest error the store keeps,
then a result at its limit. Attempts have no bound across redrives; the errors it keeps do."""

from __future__ import annotations

import json
from typing import Any

from atf_core import lifecycle
from atf_core.config import StackConfig
from atf_core.schema import MAX_KEPT_ERRORS, MAX_PAYLOAD_BYTES, MAX_RESULT_BYTES, TaskError, TaskStatus
from atf_core.store.base import Change, TaskRef
from tests.functional.test_consumer import World

# Past the 400 KB an item may take had every one been kept: 60 errors of ~1.5 KB beside 256 + 64 KiB.
FAILURES = 60


def _claimed(world: World, task_id: str) -> TaskRef:
    current = world.store.get(task_id)
    assert current is not None
    claim = Change(now=world.now, attempt=current.attempt)
    assert world.store.transition(TaskRef.of(current), lifecycle.CLAIM, claim).applied
    claimed = world.store.get(task_id)
    assert claimed is not None
    return TaskRef.of(claimed)


def test_a_full_task_failing_attempt_after_attempt_records_each_failure_and_then_its_result(
    aws: Any, config: StackConfig
) -> None:
    world = World(aws, config)
    payload = {"x": "é" * ((MAX_PAYLOAD_BYTES - 20) // 2)}  # 'é' is 2 bytes as UTF-8
    task = world.schedule(payload=payload, max_attempts=100)

    for attempt in range(1, FAILURES + 1):
        ref = _claimed(world, task.id)
        # each field longer than the store keeps of it: 4-byte characters in the message
        error = TaskError(type="E" * 300, message="😀" * 400, attempt=attempt, at=world.now, host="h" * 300)
        change = Change(now=world.now, attempt=attempt, next_at=world.now, error=error)
        assert world.store.transition(ref, lifecycle.FAIL_RETRIABLE, change).applied, f"failure {attempt}"
    result = json.dumps("é" * ((MAX_RESULT_BYTES - 2) // 2), ensure_ascii=False)
    success = Change(now=world.now, attempt=FAILURES + 1, result=result)
    assert world.store.transition(_claimed(world, task.id), lifecycle.SUCCEED, success).applied

    done = world.store.get(task.id)
    assert done is not None and done.status is TaskStatus.SUCCESS and done.payload == payload
    assert [e.attempt for e in done.errors] == list(range(1, MAX_KEPT_ERRORS + 1))
    assert done.last_error is not None and done.last_error.attempt == FAILURES
    assert [e.attempt for e in done.error_history()] == [*range(1, MAX_KEPT_ERRORS + 1), FAILURES]
    assert (len(done.last_error.type), len(done.last_error.message), len(done.last_error.host or "")) == (100, 300, 200)


def test_the_history_shows_the_latest_error_once(aws: Any, config: StackConfig) -> None:
    world = World(aws, config)
    task = world.schedule(max_attempts=5)
    for attempt in (1, 2):
        error = TaskError(type="E", message=f"try {attempt}", attempt=attempt, at=world.now)
        change = Change(now=world.now, attempt=attempt, next_at=world.now, error=error)
        assert world.store.transition(_claimed(world, task.id), lifecycle.FAIL_RETRIABLE, change).applied
    done = world.store.get(task.id)
    assert done is not None and [e.message for e in done.error_history()] == ["try 1", "try 2"]
