"""Move a task through the lifecycle the way the consumer and a worker would, for tests without them."""

from __future__ import annotations

from datetime import timedelta

from atf_core import lifecycle
from atf_core.schema import Task, TaskStatus, utcnow
from atf_core.store.base import Change, TaskRef
from atf_core.store.dynamo import DynamoTaskStore


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
