"""Time limits in one executor: which limit applies, and how the watcher and the callback's thread agree on
who records the attempt (never both). Against the local stack: tests/e2e/test_time_limits.py."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from atf_core.config import LambdaSpec, StackConfig
from atf_core.schema import TaskStatus
from atf_sdk import Lambdas, TaskContext
from atf_sdk.testing import Eager
from atf_sdk.worker import observe
from atf_sdk.worker.executor import TaskRunner
from atf_sdk.worker.heartbeat import Heartbeats
from atf_sdk.worker.time_limits import RETRY_FLOOR_S, TaskTimeout
from tests.unit.test_worker_parts import ScriptedStore, task

CONFIG = StackConfig.model_validate({"lambdas": {"work": {"timeout_seconds": 0.3}}})


def test_a_tasks_own_limit_wins_over_its_lambdas_and_bad_limits_are_refused() -> None:
    spec = CONFIG.lambdas["work"]
    assert (spec.time_limit(None), spec.time_limit(5.0), LambdaSpec().time_limit(None)) == (0.3, 5.0, None)
    for bad in (0, -1, 86_401):
        with pytest.raises(ValidationError, match="timeout_seconds"):
            LambdaSpec(timeout_seconds=bad)


def runner(callback: Any) -> tuple[TaskRunner, ScriptedStore, list[str]]:
    store = ScriptedStore([])
    ended: list[str] = []
    heartbeats = Heartbeats(store, CONFIG.timeouts, terminate=ended.append)  # type: ignore[arg-type]
    run = TaskRunner(store, CONFIG, "work", callback, heartbeats)  # type: ignore[arg-type]
    run.time_limits._terminate = lambda reason: (ended.append(reason), store.transitions.append("ended"))[0]
    return run, store, ended


def run_watched(run: TaskRunner) -> None:
    watcher = threading.Thread(target=run.time_limits.run, daemon=True)
    watcher.start()
    try:
        run.run(task())
    finally:
        run.time_limits.stop()


def test_a_sync_callback_over_its_limit_is_recorded_by_the_watcher_then_its_process_ended() -> None:
    # Given a callback that returns after its limit (a real one would not: its process ends first)
    run, store, ended = runner(lambda context: time.sleep(0.6))
    started = time.monotonic()
    run_watched(run)
    # Then the watcher wrote the attempt's TaskTimeout, under its lease, then ended the process, at the limit
    assert store.transitions == ["fail_retriable", "ended"] and "time limit of 0.3s" in ended[0]
    (change,) = store.calls
    assert change.error is not None and change.error.type == "TaskTimeout"
    assert change.next_at is not None and (change.next_at - change.now).total_seconds() >= RETRY_FLOOR_S
    # and the callback's thread, once it returned, wrote nothing
    assert time.monotonic() - started >= 0.6


class SlowToAnswer(ScriptedStore):
    """The failure's write lands at once, its answer comes 2 s later (a lost reply, then botocore's retry)."""

    def transition(self, ref: Any, transition: Any, change: Any) -> Any:
        outcome = super().transition(ref, transition, change)
        if transition.name == "fail_retriable":
            time.sleep(2.0)
        return outcome


def test_the_process_of_an_attempt_over_its_limit_ends_before_its_retry_is_due_however_slow_the_write() -> None:
    # Given a callback over its limit, and a store slow to answer the watcher's write
    run, _, _ = runner(lambda context: time.sleep(2.5))
    store = SlowToAnswer([])
    run.ends._store = store  # type: ignore[assignment]
    ended_at: list[datetime] = []
    run.time_limits._terminate = lambda reason: ended_at.append(datetime.now(UTC))
    # When the watcher stops it
    run_watched(run)
    # Then the process ended once, before the retry the write made due (its callback stopped with it)
    (change,) = store.calls
    assert len(ended_at) == 1 and change.next_at is not None and ended_at[0] < change.next_at, (ended_at, change)


def test_a_callback_within_its_limit_is_recorded_by_its_thread_and_never_watched_again() -> None:
    run, store, ended = runner(lambda context: time.sleep(0.1))
    run_watched(run)
    time.sleep(0.4)  # past the limit
    run.time_limits.enforce()
    assert (store.transitions, ended) == (["succeed"], [])


def test_an_async_callback_is_cancelled_at_its_limit_and_its_process_kept() -> None:
    cancelled: list[bool] = []

    async def forever(context: TaskContext) -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    run, store, ended = runner(forever)
    started = time.monotonic()
    run_watched(run)
    assert time.monotonic() - started < 0.3 + 0.5
    assert (store.transitions, ended, cancelled) == (["fail_retriable"], [], [True])
    assert store.calls[0].error is not None and store.calls[0].error.type == "TaskTimeout"


def logged(callback: Callable[[TaskContext], Awaitable[None]]) -> Callable[[TaskContext], Awaitable[None]]:
    """A plain decorator: what it returns is no coroutine function, though calling it gives a coroutine."""

    @functools.wraps(callback)
    def wrapper(context: TaskContext) -> Awaitable[None]:
        return callback(context)

    return wrapper


def test_a_decorated_async_callback_is_given_its_moment_to_unwind_too() -> None:
    # Given an async callback behind a plain decorator, which takes 0.1 s to unwind once cancelled
    @logged
    async def slow_to_unwind(context: TaskContext) -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            time.sleep(0.1)
            raise

    run, store, ended = runner(slow_to_unwind)
    # When it runs past its limit
    run_watched(run)
    # Then it is cancelled and fails, and its process is kept, as for an undecorated one
    assert (store.transitions, ended) == (["fail_retriable"], [])


def test_an_async_callback_that_swallows_its_cancelling_and_returns_still_timed_out() -> None:
    async def stubborn(context: TaskContext) -> str:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            return "finished anyway"
        return "never"

    run, store, ended = runner(stubborn)
    run_watched(run)
    assert (store.transitions, ended) == (["fail_retriable"], [])
    assert store.calls[0].error is not None and store.calls[0].error.type == "TaskTimeout"


def test_a_timeout_error_the_callback_raises_itself_is_not_a_time_limit() -> None:
    async def raises(context: TaskContext) -> None:
        raise TimeoutError("the gateway timed out")

    run, store, _ = runner(raises)
    run_watched(run)
    assert store.calls[0].error is not None and store.calls[0].error.type == "TimeoutError"


lambdas = Lambdas()


@lambdas.register("work")
async def slow(context: TaskContext) -> None:
    await asyncio.sleep(float(context.payload.get("seconds", 0)))


def test_eager_mode_cancels_an_async_callback_at_its_limit() -> None:
    eager = Eager(lambdas, CONFIG)
    over = eager.run("work", {"seconds": 5})
    assert over.status is TaskStatus.RETRIABLE_FAILURE and isinstance(over.raised, TaskTimeout)
    assert over.error is not None and (over.error.type, over.error.message) == (
        "TaskTimeout",
        "ran over its time limit of 0.3s",
    )
    assert eager.run("work", {"seconds": 0.5}, timeout_seconds=1).succeeded  # its own limit, over the lambda's


def test_the_watchers_lines_of_an_attempt_it_stopped_carry_the_tasks_keys() -> None:
    # Given the worker's JSON lines, as its log handler writes them
    lines: list[dict[str, Any]] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(json.loads(observe._formatter.format(record)))  # type: ignore[method-assign]
    logger = logging.getLogger("atf")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        # When a sync callback runs over its limit
        run, _, _ = runner(lambda context: time.sleep(0.6))
        run_watched(run)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    # Then the watcher's error and the attempt's "task finished" name the task, as the callback's own lines do
    watched = [line for line in lines if "time limit" in line["message"] or line["message"] == "task finished"]
    expected = task()
    assert len(watched) == 2, lines
    for line in watched:
        assert (line.get("task_id"), line.get("attempt"), line.get("lambda")) == (expected.id, expected.attempt, "work")
