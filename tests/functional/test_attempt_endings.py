"""How an attempt's end is taken when it is not the ordinary one: a callback that raises what is not an
Exception (sys.exit(), a CancelledError from its own awaits) fails its attempt like any other raise (it
ended the executor thread with the task still heartbeated, `processing` for as long as the process lived);
an attempt whose task moved on without it leaves its limit slots to the attempt after it."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

import pytest

from atf_core import lifecycle
from atf_core.config import Limits, StackConfig
from atf_core.limits import Grant, Limiter, Refusal
from atf_core.schema import TaskStatus, utcnow
from atf_core.store.base import Change, TaskRef
from atf_core.store.counters import Counters
from atf_core.store.tasks import DynamoTaskStore
from atf_core.telemetry import MetricBuffer
from atf_sdk.worker.executor import TaskRunner, _run_one, build_runner
from atf_sdk.worker.heartbeat import Heartbeats
from atf_sdk.worker.registry import TaskContext
from tests.telemetry.test_worker_metrics import claimed


def exits(_: TaskContext) -> None:
    sys.exit(3)


async def awaits_a_cancelled_task(_: TaskContext) -> None:
    async def forever() -> None:
        await asyncio.sleep(3600)

    inner = asyncio.ensure_future(forever())
    await asyncio.sleep(0)
    inner.cancel()
    await inner  # raises CancelledError, a BaseException, out of the callback


@pytest.mark.parametrize(("callback", "raised"), [(exits, "SystemExit"), (awaits_a_cancelled_task, "CancelledError")])
def test_a_callback_raising_a_base_exception_fails_its_attempt_and_is_no_longer_heartbeated(
    aws: Any, config: StackConfig, callback: Callable[[TaskContext], Any], raised: str
) -> None:
    # Given a claimed task whose callback raises what is not an Exception
    store = DynamoTaskStore(aws.dynamodb, config)
    task = claimed(store, config, "work")
    heartbeats = Heartbeats(store, config.timeouts)
    # When its executor thread runs it, then the thread goes on (nothing escapes the run)
    TaskRunner(store, config, task.lambda_, callback, heartbeats).run(task)
    # And the attempt is recorded as a retriable failure naming what was raised, and no longer heartbeated
    after = store.get(task.id)
    assert after is not None and after.status is TaskStatus.RETRIABLE_FAILURE and after.attempt == task.attempt
    assert after.last_error is not None and after.last_error.type == raised
    assert task.id not in heartbeats._running


class Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no text for this one")


def raises_unprintable(_: TaskContext) -> None:
    raise Unprintable


@pytest.mark.parametrize("traced", [False, True], ids=["untraced", "traced"])
def test_a_callback_raising_an_exception_whose_message_cannot_be_read_fails_its_attempt(
    aws: Any, config: StackConfig, monkeypatch: pytest.MonkeyPatch, traced: bool
) -> None:
    # Given a claimed task whose callback raises an exception whose __str__ raises, with spans recorded or not
    # (OpenTelemetry's own record of an exception calls str() on it)
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider() if traced else trace.NoOpTracerProvider()
    monkeypatch.setattr(trace, "get_tracer", lambda name, *_, **__: provider.get_tracer(name))
    store = DynamoTaskStore(aws.dynamodb, config)
    task = claimed(store, config, "work")
    heartbeats = Heartbeats(store, config.timeouts)
    # When its executor thread runs it, nothing escapes the run (an escape ended the executor thread for good)
    TaskRunner(store, config, task.lambda_, raises_unprintable, heartbeats).run(task)
    # Then the attempt is recorded as a retriable failure naming the class, and no longer heartbeated
    after = store.get(task.id)
    assert after is not None and after.status is TaskStatus.RETRIABLE_FAILURE
    assert after.last_error is not None and after.last_error.type == "Unprintable"
    assert after.last_error.message == "Unprintable (its message could not be read)"
    assert task.id not in heartbeats._running


def test_an_error_escaping_the_runner_costs_the_attempt_not_the_executor_thread(
    aws: Any, config: StackConfig, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a claimed task, and a runner that fails before the callback runs (a bug of the framework's)
    store = DynamoTaskStore(aws.dynamodb, config)
    task = claimed(store, config, "work")
    heartbeats = Heartbeats(store, config.timeouts)
    runner = TaskRunner(store, config, task.lambda_, lambda _: None, heartbeats)

    def broken(_: Any) -> None:
        raise RuntimeError("a bug")

    runner._started = broken  # type: ignore[method-assign]
    # When the executor thread runs it, the error goes no further than the log
    _run_one(runner, task)
    # Then the attempt is no longer heartbeated: its lease lapses and it runs again
    assert task.id not in heartbeats._running
    assert any("runs again once its lease lapses" in r.getMessage() for r in caplog.records)


def test_an_attempt_whose_task_moved_on_leaves_the_limit_slot_to_the_attempt_after_it(
    aws: Any, config: StackConfig
) -> None:
    # Given a lambda that runs one task at a time, and attempt 1 of a task holding that slot (by its task id)
    lambdas = dict(config.lambdas)
    lambdas["work"] = lambdas["work"].model_copy(update={"limits": Limits(max_running=1)})
    limited = config.model_copy(update={"lambdas": lambdas})
    store = DynamoTaskStore(aws.dynamodb, limited)
    limiter = Limiter(Counters(aws.dynamodb, limited.table_name), limited)
    task = claimed(store, limited, "work")
    assert isinstance(limiter.acquire("work", task.collection, task.id), Grant)

    def outlived(_: TaskContext) -> None:
        # while it runs, its lease lapses: the task is sent again and attempt 2 claims it, and the slot
        assert store.transition(TaskRef.of(task), lifecycle.REQUEUE, Change(now=utcnow(), attempt=1)).applied
        assert store.transition(TaskRef.of(task), lifecycle.CLAIM, Change(now=utcnow(), attempt=1)).applied
        assert isinstance(limiter.acquire("work", task.collection, task.id), Grant)

    # When attempt 1 ends, its result refused
    build_runner(aws, limited, "work", outlived, MetricBuffer(service="test"), utcnow).run(task)  # type: ignore[arg-type]
    # Then the slot is still attempt 2's: the lambda runs no second task beside it
    assert set(Counters(aws.dynamodb, limited.table_name).slots("work")) == {task.id}
    assert isinstance(limiter.acquire("work", "default", "another"), Refusal)
