"""Callbacks the console's browser tests run on a real worker host."""

from __future__ import annotations

import time

from atf_sdk.worker.registry import Fatal, Lambdas, Retry, TaskContext

lambdas = Lambdas()


@lambdas.register("work")
def work(task: TaskContext) -> None:
    time.sleep(float(task.payload.get("seconds", 0.02)))
    if task.attempt < int(task.payload.get("succeed_on", 1)):
        raise Retry(f"attempt {task.attempt} fails on purpose", after=0.1)
    if task.payload.get("fatal"):
        raise Fatal(str(task.payload["fatal"]))


@lambdas.register("mail")
def mail(task: TaskContext) -> None:
    time.sleep(0.02)
