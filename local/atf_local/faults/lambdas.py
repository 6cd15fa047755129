"""Callbacks the fault scenarios run on real worker hosts.

Each behaves by its payload, so one registry serves every scenario:
`seconds` to sleep (on the first attempt only when `first_only` is set),
`fail_rate` for a retriable failure drawn per attempt from the task id, and
`poison` to kill the executor process that runs it, every time.
"""

from __future__ import annotations

import os
import random
import time

from atf_local.instruments.executions import RecordedLambdas, execution_history
from atf_sdk.worker.registry import Retry, TaskContext

POISON_EXIT_CODE = 99
lambdas = RecordedLambdas()  # each callback records its start and end for the checker


def _sleep_and_maybe_fail(task: TaskContext) -> None:
    seconds = float(task.payload.get("seconds", 0.05))
    if not task.payload.get("first_only") or task.attempt == 1:
        time.sleep(seconds)
    rate = float(task.payload.get("fail_rate", 0.0))
    # Seeded by task and attempt: a rerun of one attempt fails the same way.
    if rate and random.Random(f"{task.id}/{task.attempt}").random() < rate:
        raise Retry(f"attempt {task.attempt} fails on purpose", after=0.2)


@lambdas.register("steady")
def steady(task: TaskContext) -> None:
    _sleep_and_maybe_fail(task)


@lambdas.register("slow")
def slow(task: TaskContext) -> None:
    _sleep_and_maybe_fail(task)


@lambdas.register("noisy")
def noisy(task: TaskContext) -> None:
    _sleep_and_maybe_fail(task)


@lambdas.register("quiet")
def quiet(task: TaskContext) -> None:
    _sleep_and_maybe_fail(task)


@lambdas.register("poison")
def poison(task: TaskContext) -> None:
    """Kills the executor that runs it, on every attempt, like a segfaulting native library."""
    execution_history().record("exit", reason="poison", task=task.id, attempt=task.attempt, code=POISON_EXIT_CODE)
    os._exit(POISON_EXIT_CODE)
