"""Example callbacks, one per lambda. A worker host serves them with

atf worker examples.lambdas:lambdas
"""

from __future__ import annotations

import time

from atf_sdk.worker.registry import Fatal, Lambdas, Retry, TaskContext

lambdas = Lambdas()


@lambdas.register("greet")
def greet(task: TaskContext) -> None:
    """Says hello after a short pause; `seconds` in the payload makes it slower."""
    time.sleep(float(task.payload.get("seconds", 0.2)))
    print(f"hello {task.payload.get('name', 'world')} ({task.priority}, attempt {task.attempt})", flush=True)


@lambdas.register("flaky")
def flaky(task: TaskContext) -> None:
    """Fails until its attempt reaches `succeed_on`: shows retries with backoff."""
    succeed_on = int(task.payload.get("succeed_on", 3))
    if task.attempt < succeed_on:
        raise Retry(f"attempt {task.attempt} failed on purpose", after=float(task.payload.get("retry_after", 1)))


@lambdas.register("charge")
def charge(task: TaskContext) -> None:
    """Refuses a negative amount for good: shows a fatal failure."""
    amount = task.payload.get("amount")
    if not isinstance(amount, int | float) or amount < 0:
        raise Fatal(f"cannot charge {amount!r}")
