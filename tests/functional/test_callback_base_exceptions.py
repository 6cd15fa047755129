"""A callback that raises what is not an Exception (sys.exit(), a CancelledError from its own awaits) fails
its attempt like any other raise: it ended the executor thread with the task still heartbeated, shown
`processing` for as long as the process lived and never run again."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

import pytest

from atf_core.config import StackConfig
from atf_core.schema import TaskStatus
from atf_core.store.tasks import DynamoTaskStore
from atf_sdk.worker.executor import TaskRunner
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
