"""`async def` callbacks end as sync ones do: awaited, their returns, retries and fatal failures kept.

Before they were awaited, an async callback "succeeded" without running: its coroutine was dropped.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from atf_core.config import StackConfig
from atf_core.schema import TaskStatus
from atf_sdk import Fatal, Lambdas, Retry, TaskContext
from atf_sdk.testing import Eager
from atf_sdk.worker.async_callbacks import completed

CONFIG = StackConfig.model_validate(
    {"lambdas": {"fetch": {"priorities": ["normal"], "default_priority": "normal", "max_attempts": 3}}}
)
lambdas = Lambdas()
ran: list[str] = []


@lambdas.register("fetch")
async def fetch(task: TaskContext) -> Any:
    await asyncio.sleep(0.01)
    ran.append(task.id)
    match task.payload.get("then"):
        case "retry":
            raise Retry("later", after=7)
        case "fatal":
            raise Fatal("gone for good")
        case "raise":
            raise ConnectionError("peer reset")
    return {"fetched": task.payload.get("url")}


eager = Eager(lambdas, CONFIG)


def test_an_async_callback_runs_and_its_return_is_its_value() -> None:
    ran.clear()
    outcome = eager.run("fetch", {"url": "u"})
    assert (outcome.status, outcome.value, ran) == (TaskStatus.SUCCESS, {"fetched": "u"}, [outcome.context.id])


@pytest.mark.parametrize(
    ("then", "status", "error_type"),
    [
        ("retry", TaskStatus.RETRIABLE_FAILURE, "Retry"),
        ("raise", TaskStatus.RETRIABLE_FAILURE, "ConnectionError"),
        ("fatal", TaskStatus.DEAD_LETTER, "Fatal"),
    ],
)
def test_what_an_async_callback_raises_ends_its_attempt_as_a_sync_ones_would(
    then: str, status: TaskStatus, error_type: str
) -> None:
    outcome = eager.run("fetch", {"then": then})
    assert outcome.status is status
    assert outcome.error is not None and outcome.error.type == error_type
    assert type(outcome.raised).__name__ == error_type
    if then == "retry":
        assert outcome.retry_in == pytest.approx(7)


def test_each_executor_thread_keeps_one_event_loop_for_its_tasks() -> None:
    async def loop_id() -> int:
        return id(asyncio.get_running_loop())

    def on_a_thread(into: list[int]) -> None:
        into.extend(completed(loop_id()) for _ in range(3))

    first: list[int] = []
    second: list[int] = []
    for into in (first, second):
        thread = threading.Thread(target=on_a_thread, args=(into,))
        thread.start()
        thread.join()
    assert len(set(first)) == 1 and len(set(second)) == 1  # a loop per thread, kept across tasks
    assert completed("plain") == "plain"  # a sync callback's result is left alone
