"""The look-ahead count: waiting tasks due within the window, per lambda, on a consumer group's shards."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from atf_core import lifecycle
from atf_core.config import StackConfig
from atf_core.consumer.consumer import ConsumerGroup
from atf_core.consumer.due_soon import DueSoon
from atf_core.schema import ScheduleRequest, utcnow
from atf_core.store.base import Change, TaskRef
from atf_core.store.index import IndexStore
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling


def schedule(scheduling: Scheduling, now: datetime, lambda_name: str, in_s: float, **fields: Any) -> str:
    request = {"lambda": lambda_name, "run_at": (now + timedelta(seconds=in_s)).isoformat(), **fields}
    return scheduling.schedule(ScheduleRequest.model_validate(request)).task.id


@pytest.fixture
def world(aws: Any, config: StackConfig) -> tuple[DynamoTaskStore, IndexStore, datetime]:
    now = utcnow()
    store = DynamoTaskStore(aws.dynamodb, config)
    scheduling = Scheduling(store, config)
    for in_s, priority in ((10, "high"), (60, "low"), (120, "normal"), (299, "high"), (290, "low")):
        schedule(scheduling, now, "work", in_s, priority=priority)
    schedule(scheduling, now, "work", 301)  # beyond the window
    schedule(scheduling, now, "work", 3600)
    schedule(scheduling, now, "work", -5)  # already due: the queues' backlog, not the look-ahead
    schedule(scheduling, now, "sleepy", 30)
    # Running, its heartbeat deadline within the window: not a task to come
    running = TaskRef(schedule(scheduling, now, "sleepy", -1), "sleepy", "normal")
    assert store.transition(running, lifecycle.CLAIM, Change(now=now, attempt=0)).applied
    beat = Change(now=now, attempt=1, next_at=now + timedelta(seconds=40))
    assert store.transition(running, lifecycle.HEARTBEAT, beat).applied
    return store, IndexStore(aws.dynamodb, config.table_name), now


def test_counts_each_lambdas_waiting_tasks_due_within_the_window(world: Any, config: StackConfig) -> None:
    _, index, now = world
    assert DueSoon(index, config.model_copy(update={"due_soon_window": 300.0})).count(now) == {"work": 5, "sleepy": 1}


def test_the_groups_counts_add_up_to_the_whole(world: Any, config: StackConfig) -> None:
    _, index, now = world
    config = config.model_copy(update={"due_soon_window": 300.0})
    parts = [DueSoon(index, config, ConsumerGroup(i, 2)).count(now) for i in range(2)]
    assert {name: parts[0][name] + parts[1][name] for name in config.lambdas} == {"work": 5, "sleepy": 1}


def test_a_lambda_with_nothing_coming_reads_zero_and_a_zero_window_counts_nothing(
    aws: Any, config: StackConfig
) -> None:
    index = IndexStore(aws.dynamodb, config.table_name)
    assert DueSoon(index, config).count(utcnow()) == {"work": 0, "sleepy": 0}
    assert DueSoon(index, config.model_copy(update={"due_soon_window": 0.0})).count(utcnow()) == {}


def test_the_window_is_bounded_and_named_when_wrong(config: StackConfig) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="due_soon_window"):
        StackConfig.model_validate({**config.model_dump(), "due_soon_window": -1})
