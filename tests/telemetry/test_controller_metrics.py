"""The controller's metrics: claims, drops by a gate, tasks a limit holds back (once each)."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest

from atf_core import lifecycle
from atf_core.config import StackConfig
from atf_core.gating import Gating
from atf_core.limits import Grant, Refusal
from atf_core.queues import TaskMessage
from atf_core.schema import GateAction, ScheduleRequest, TaskStatus, to_ms, utcnow
from atf_core.store.base import Change, TaskRef
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling
from atf_core.telemetry import WORKER_SERVICE, Metric, MetricBuffer
from atf_sdk.worker.buffers import Buffered
from atf_sdk.worker.controller import Controller, ControllerSettings
from tests.telemetry.emf import named


class NoRoom:
    """A limit that is always full."""

    def limited(self, lambda_name: str) -> bool:
        return True

    def acquire(self, lambda_name: str, collection: str, task_id: str, flow_key: str | None = None) -> Refusal:
        return Refusal("always full")

    def release(self, grant: Grant) -> None:
        return None


@pytest.fixture
def world(aws: Any, config: StackConfig) -> tuple[Controller, DynamoTaskStore, MetricBuffer]:
    store = DynamoTaskStore(aws.dynamodb, config)
    buffer = MetricBuffer(service=WORKER_SERVICE)
    settings = ControllerSettings(gate_refresh_s=0)
    controller = Controller(store, aws.sqs, aws.sqs, config, ["work"], settings, metrics=buffer)
    return controller, store, buffer


def enqueued(store: DynamoTaskStore, config: StackConfig, priority: str) -> Buffered:
    """A task the consumer enqueued, as the controller's buffer holds its message."""
    request = ScheduleRequest.model_validate({"lambda": "work", "priority": priority})
    task = Scheduling(store, config).schedule(request).task
    now = utcnow()
    store.transition(TaskRef.of(task), lifecycle.ENQUEUE, Change(now=now, due_by=now))
    rank = config.lambdas["work"].priorities.index(priority)
    message = TaskMessage(task.id, 0, to_ms(now), "default")
    return Buffered(rank, to_ms(now), 0, message, "https://queue.invalid/none", "receipt")


def flushed(buffer: MetricBuffer) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        buffer.flush()
    return out.getvalue()


def test_a_claim_is_counted_per_lambda_and_priority(
    world: tuple[Controller, DynamoTaskStore, MetricBuffer], config: StackConfig
) -> None:
    controller, store, buffer = world
    task = controller.claim("work", enqueued(store, config, "high"))
    assert task is not None and task.status is TaskStatus.CLAIMED
    (claimed,) = named(flushed(buffer), Metric.CLAIMED)
    assert (claimed.dimensions, claimed.total) == ({"lambda": "work", "priority": "high", "service": WORKER_SERVICE}, 1)


def test_a_drop_gate_met_at_claim_time_counts_a_drop(
    world: tuple[Controller, DynamoTaskStore, MetricBuffer], config: StackConfig
) -> None:
    controller, store, buffer = world
    item = enqueued(store, config, "low")
    Gating(store, config).set("work", None, GateAction.DROP, None, "test")
    assert controller.claim("work", item) is None
    assert [p.total for p in named(flushed(buffer), Metric.DROPPED, priority="low")] == [1]
    assert not named(flushed(buffer), Metric.CLAIMED)


def test_a_task_held_back_by_a_limit_is_counted_once_however_often_it_is_rechecked(
    world: tuple[Controller, DynamoTaskStore, MetricBuffer], config: StackConfig
) -> None:
    controller, store, buffer = world
    controller._limiter = NoRoom()
    item = enqueued(store, config, "normal")
    for _ in range(3):
        assert controller.claim("work", item) is None
    (limited,) = named(flushed(buffer), Metric.LIMITED)
    assert (limited.dimensions["priority"], limited.total) == ("normal", 1)
