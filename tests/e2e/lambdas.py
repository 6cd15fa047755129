"""Callbacks the end-to-end tests run on a real worker host."""

from __future__ import annotations

import asyncio
import time

from atf_sdk.worker.registry import Fatal, Lambdas, Retry, TaskContext

lambdas = Lambdas()


@lambdas.register("work")
def work(task: TaskContext) -> None:
    time.sleep(float(task.payload.get("seconds", 0.05)))
    if task.attempt < int(task.payload.get("succeed_on", 1)):
        raise Retry(f"attempt {task.attempt} fails on purpose", after=0.2)
    if task.payload.get("fatal"):
        raise Fatal("this input can never work")


@lambdas.register("sleepy")
def sleepy(task: TaskContext) -> None:
    """Slow on its first attempt only, so a re-run after a crash is quick."""
    if task.attempt == 1:
        time.sleep(float(task.payload.get("seconds", 60)))


# The same callbacks as `async def`: a host awaits them, with the same heartbeats, retries and results.
async_lambdas = Lambdas()


@async_lambdas.register("work")
async def work_async(task: TaskContext) -> None:
    await asyncio.sleep(float(task.payload.get("seconds", 0.05)))
    if task.attempt < int(task.payload.get("succeed_on", 1)):
        raise Retry(f"attempt {task.attempt} fails on purpose", after=0.2)
    if task.payload.get("fatal"):
        raise Fatal("this input can never work")


@async_lambdas.register("sleepy")
async def sleepy_async(task: TaskContext) -> None:
    if task.attempt == 1:
        await asyncio.sleep(float(task.payload.get("seconds", 60)))
