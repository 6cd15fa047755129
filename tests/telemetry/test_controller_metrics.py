"""The controller's metrics: claims, drops by a gate, tasks a limit holds back (once each), and those a
flow key's limit held back (per lambda, the key on the log line)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from typing import Any

import pytest

from atf_core import lifecycle
from atf_core.config import StackConfig
from atf_core.gating import Gating
from atf_core.limits import KEY_HOLD_METRICS, Grant, KeyHold, Limiter, Refusal
from atf_core.queues import TaskMessage
from atf_core.schema import GateAction, ScheduleRequest, TaskStatus, to_ms, utcnow
from atf_core.store.base import Change, TaskRef
from atf_core.store.counters import Counters
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling
from atf_core.telemetry import WORKER_SERVICE, LogKey, LogLine, Metric, MetricBuffer
from atf_sdk.worker.buffers import Buffered
from atf_sdk.worker.controller import Controller
from tests.conftest import work_controller
from tests.functional.test_flow_keys import keyed_config
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
def world(aws: Any, config: StackConfig, drained: list[Controller]) -> tuple[Controller, DynamoTaskStore, MetricBuffer]:
    return work_controller(aws, config, drained, limits=False)


def enqueued(store: DynamoTaskStore, config: StackConfig, priority: str, flow_key: str | None = None) -> Buffered:
    """A task the consumer enqueued, as the controller's buffer holds its message."""
    request = ScheduleRequest.model_validate({"lambda": "work", "priority": priority, "flow_key": flow_key})
    task = Scheduling(store, config).schedule(request).task
    now = utcnow()
    store.transition(TaskRef.of(task), lifecycle.ENQUEUE, Change(now=now, due_by=now))
    rank = config.lambdas["work"].priorities.index(priority)
    message = TaskMessage(task.id, 0, to_ms(now), "default", flow_key)
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
    out = flushed(buffer)
    (limited,) = named(out, Metric.LIMITED)
    assert (limited.dimensions["priority"], limited.total) == ("normal", 1)
    assert not [name for name in KEY_HOLD_METRICS.values() if named(out, name)]  # not a flow key's limit


# -- flow keys (issue 16): per lambda, the key on the log line only --------------------------
def keyed_world(
    aws: Any, config: StackConfig, drained: list[Controller], **key_limits: Any
) -> tuple[Controller, DynamoTaskStore, MetricBuffer, StackConfig]:
    keyed = keyed_config(config, **key_limits)
    controller, store, buffer = work_controller(aws, keyed, drained)
    # one moment for every start, so that both claims fall in one rate window whatever the wall clock does
    controller._limiter = Limiter(Counters(aws.dynamodb, keyed.table_name), keyed, clock=lambda: 1_000.0)
    return controller, store, buffer, keyed


def held_back(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line["message"] == LogLine.HELD_BACK]


@pytest.mark.parametrize(
    ("limits", "hold", "metric"),
    [
        ({"max_running": 1}, KeyHold.MAX_RUNNING, Metric.KEY_WAITED),
        ({"max_starts_per_second": 0.5}, KeyHold.THROTTLE, Metric.KEY_THROTTLED),
    ],
)
def test_a_task_its_flow_key_holds_back_is_counted_per_lambda_and_logged_with_its_key_once(
    aws: Any,
    config: StackConfig,
    drained: list[Controller],
    log_lines: Callable[[], list[dict[str, Any]]],
    limits: dict[str, Any],
    hold: KeyHold,
    metric: str,
) -> None:
    controller, store, buffer, keyed = keyed_world(aws, config, drained, **limits)
    assert controller.claim("work", enqueued(store, keyed, "normal", "customer-42"), "h:1") is not None
    waiting = enqueued(store, keyed, "normal", "customer-42")
    for _ in range(3):  # rechecked: still one task held back
        assert controller.claim("work", waiting, "h:1") is None
    out = flushed(buffer)
    (point,) = named(out, metric)
    assert (point.dimensions, point.total) == ({"lambda": "work", "priority": "normal", "service": WORKER_SERVICE}, 1)
    assert [p.total for p in named(out, Metric.LIMITED)] == [1]
    assert not [name for name in KEY_HOLD_METRICS.values() if name != metric and named(out, name)]
    (line,) = held_back(log_lines())
    assert line[LogKey.FLOW_KEY] == "customer-42" and line[LogKey.HELD_BY] == hold.value
    assert (line["task_id"], line["lambda"], line["priority"]) == (waiting.message.task_id, "work", "normal")


def test_a_task_over_its_flow_keys_rate_limit_counts_as_rate_limited_and_dropped(
    aws: Any, config: StackConfig, drained: list[Controller], log_lines: Callable[[], list[dict[str, Any]]]
) -> None:
    controller, store, buffer, keyed = keyed_world(
        aws, config, drained, max_starts_per_second=0.5, over_rate="rate_limit"
    )
    assert controller.claim("work", enqueued(store, keyed, "normal", "customer-7"), "h:1") is not None
    over = enqueued(store, keyed, "normal", "customer-7")
    assert controller.claim("work", over, "h:1") is None
    dropped = store.get(over.message.task_id)
    assert dropped is not None and dropped.status is TaskStatus.DROPPED
    out = flushed(buffer)
    assert [p.total for p in named(out, Metric.KEY_RATE_LIMITED, priority="normal")] == [1]
    assert [p.total for p in named(out, Metric.DROPPED, priority="normal")] == [1]
    assert not named(out, Metric.KEY_THROTTLED)
    (line,) = held_back(log_lines())
    assert (line[LogKey.FLOW_KEY], line[LogKey.HELD_BY]) == ("customer-7", KeyHold.RATE_LIMIT.value)
