"""A worker's TaskRunner: the metrics each outcome emits, and the task's keys on every log line."""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from atf_core import lifecycle
from atf_core.config import StackConfig
from atf_core.schema import ScheduleRequest, Task, TaskStatus, utcnow
from atf_core.store.base import Change, TaskRef
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling
from atf_core.telemetry import WORKER_SERVICE, LogKey, LogLine, Metric, MetricBuffer
from atf_sdk.worker.executor import TaskRunner
from atf_sdk.worker.heartbeat import Heartbeats
from atf_sdk.worker.registry import Fatal, Retry, TaskContext
from tests.telemetry.emf import named

callback_log = logging.getLogger("owner.callback")


@pytest.fixture
def store(aws: Any, config: StackConfig) -> DynamoTaskStore:
    return DynamoTaskStore(aws.dynamodb, config)


def claimed(
    store: DynamoTaskStore,
    config: StackConfig,
    lambda_name: str,
    lag_s: float = 0.0,
    flow_key: str | None = None,
    host: str | None = None,
    **fields: Any,
) -> Task:
    """A task as a controller hands it to an executor (`host`): enqueued, then claimed lag_s after its time.
    `fields`: more of its schedule request (max_attempts, timeout_seconds)."""
    body = {"lambda": lambda_name, "priority": "normal", "flow_key": flow_key, **fields}
    request = ScheduleRequest.model_validate(body)
    task = Scheduling(store, config).schedule(request, utcnow() - timedelta(seconds=lag_s)).task
    now = utcnow()
    enqueued = store.transition(TaskRef.of(task), lifecycle.ENQUEUE, Change(now=now, due_by=now)).task
    assert enqueued is not None
    outcome = store.transition(TaskRef.of(task), lifecycle.CLAIM, Change(now=now, attempt=enqueued.attempt, host=host))
    assert outcome.applied and outcome.task is not None
    return outcome.task


def run(store: DynamoTaskStore, config: StackConfig, task: Task, callback: Callable[[TaskContext], None]) -> str:
    """Run one task through a TaskRunner; the EMF its metrics flush to."""
    buffer = MetricBuffer(service=WORKER_SERVICE)
    heartbeats = Heartbeats(store, config.timeouts)
    TaskRunner(store, config, task.lambda_, callback, heartbeats, buffer).run(task)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        buffer.flush()
    return out.getvalue()


def test_a_success_counts_started_and_succeeded_with_lag_and_duration(
    store: DynamoTaskStore, config: StackConfig
) -> None:
    task = claimed(store, config, "work", lag_s=1.5)
    out = run(store, config, task, lambda _: None)

    dimensions = {"lambda": "work", "priority": "normal", "service": WORKER_SERVICE}
    for metric in (Metric.STARTED, Metric.SUCCEEDED):
        assert [(p.dimensions, p.total) for p in named(out, metric)] == [(dimensions, 1)]
    (lag,) = named(out, Metric.START_LAG_MS)
    assert lag.unit == "Milliseconds" and 1500 <= lag.values[0] < 5000
    (duration,) = named(out, Metric.EXECUTION_MS)
    assert duration.unit == "Milliseconds" and duration.values[0] >= 0
    assert not named(out, Metric.RETRIABLE_FAILURES) and not named(out, Metric.FATAL_FAILURES)


def test_a_retry_counts_a_retriable_failure(store: DynamoTaskStore, config: StackConfig) -> None:
    def flaky(task: TaskContext) -> None:
        raise Retry("not yet", after=30)

    out = run(store, config, claimed(store, config, "work"), flaky)
    assert [p.total for p in named(out, Metric.RETRIABLE_FAILURES, priority="normal")] == [1]
    assert not named(out, Metric.SUCCEEDED)


@pytest.mark.parametrize(("lambda_name", "dead_lettered"), [("work", False), ("sleepy", True)])
def test_a_fatal_failure_counts_as_one_and_as_a_dead_letter_where_they_are_kept(
    store: DynamoTaskStore, config: StackConfig, lambda_name: str, dead_lettered: bool
) -> None:
    def broken(task: TaskContext) -> None:
        raise Fatal("never")

    task = claimed(store, config, lambda_name)
    out = run(store, config, task, broken)
    assert [p.total for p in named(out, Metric.FATAL_FAILURES, **{"lambda": lambda_name})] == [1]
    assert bool(named(out, Metric.DEAD_LETTERED)) is dead_lettered
    final = store.get(task.id)
    assert final is not None
    assert final.status is (TaskStatus.DEAD_LETTER if dead_lettered else TaskStatus.FATAL_FAILURE)


def test_every_line_logged_while_a_task_runs_carries_its_id_and_attempt(
    store: DynamoTaskStore, config: StackConfig, log_lines: Callable[[], list[dict[str, Any]]]
) -> None:
    def chatty(task: TaskContext) -> None:
        callback_log.info("working on %s", task.payload)
        raise RuntimeError("boom")

    task = claimed(store, config, "work")
    run(store, config, task, chatty)
    callback_log.info("after the task")

    lines = log_lines()
    during, after = lines[:-1], lines[-1]
    messages = [line["message"] for line in during]
    assert messages[0] == "task started" and "working on {}" in messages and messages[-1] == "task finished"
    assert any("boom" in m for m in messages)  # the traceback of the failed attempt
    for line in during:
        assert (line["task_id"], line["attempt"], line["lambda"], line["priority"]) == (task.id, 1, "work", "normal")
        assert line["service"] == WORKER_SERVICE
    assert during[-1]["outcome"] == "retriable_failure"
    assert "task_id" not in after and after["message"] == "after the task"


def test_a_keyed_tasks_lines_carry_its_flow_key_and_a_keyless_ones_none(
    store: DynamoTaskStore, config: StackConfig, log_lines: Callable[[], list[dict[str, Any]]]
) -> None:
    keyed, keyless = claimed(store, config, "work", flow_key="customer-42"), claimed(store, config, "work")
    run(store, config, keyed, lambda task: callback_log.info("keyed"))
    run(store, config, keyless, lambda task: callback_log.info("keyless"))
    lines = log_lines()
    started = [line for line in lines if line["message"] == LogLine.TASK_STARTED]
    assert [line.get(LogKey.FLOW_KEY) for line in started] == ["customer-42", None]
    by_message = {line["message"]: line for line in lines}
    assert by_message["keyed"][LogKey.FLOW_KEY] == "customer-42"
    assert LogKey.FLOW_KEY not in by_message["keyless"]  # no key left over from the task before, no null
