"""Move a task through the lifecycle the way the consumer and a worker would, for tests without them."""

from __future__ import annotations

from datetime import timedelta

from atf_core import lifecycle
from atf_core.schema import Task, TaskError, TaskStatus, utcnow
from atf_core.store.base import Change, TaskRef
from atf_core.store.tasks import DynamoTaskStore


def advance(store: DynamoTaskStore, task_id: str, target: TaskStatus) -> Task:
    """new -> enqueued -> claimed -> processing -> success, stopping at target."""
    steps = [
        (TaskStatus.ENQUEUED, lifecycle.ENQUEUE, {}),
        (TaskStatus.CLAIMED, lifecycle.CLAIM, {"attempt": 0}),
        (TaskStatus.PROCESSING, lifecycle.HEARTBEAT, {"attempt": 1, "next_at": utcnow() + timedelta(seconds=30)}),
        (TaskStatus.SUCCESS, lifecycle.SUCCEED, {"attempt": 1}),
    ]
    task = store.get(task_id)
    assert task is not None
    for reached, transition, change in steps:
        outcome = store.transition(TaskRef.of(task), transition, Change(now=utcnow(), **change))  # type: ignore[arg-type]
        assert outcome.applied and outcome.task is not None, (transition.name, outcome)
        task = outcome.task
        if reached is target:
            return task
    raise AssertionError(f"{target} is not on the happy path")


def kill(store: DynamoTaskStore, task_id: str, error_type: str = "ValueError", host: str = "test:1") -> Task:
    """Run a task's attempt and fail it for good: a dead letter with that attempt's error."""
    task = advance(store, task_id, TaskStatus.CLAIMED)
    now = utcnow()
    error = TaskError(type=error_type, message=f"{error_type} on purpose", attempt=task.attempt, at=now, host=host)
    change = Change(now=now, attempt=task.attempt, next_at=now, error=error)
    outcome = store.transition(TaskRef.of(task), lifecycle.FAIL_TO_DEAD_LETTER, change)
    assert outcome.applied and outcome.task is not None, outcome
    return outcome.task


def finish(store: DynamoTaskStore, task_id: str) -> Task:
    """A running task succeeds."""
    task = store.get(task_id)
    assert task is not None
    outcome = store.transition(TaskRef.of(task), lifecycle.SUCCEED, Change(now=utcnow(), attempt=task.attempt))
    assert outcome.applied and outcome.task is not None, outcome
    return outcome.task
