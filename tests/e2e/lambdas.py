"""Callbacks the end-to-end tests run on a real worker host."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

from atf_sdk.worker.registry import Fatal, Lambdas, Retry, TaskContext

lambdas = Lambdas()


@lambdas.register("work")
def work(task: TaskContext) -> None:
    time.sleep(float(task.payload.get("seconds", 0.05)))
    if task.attempt == 1 and "retry_after" in task.payload:  # any value a payload carries, as a callback gives it
        raise Retry("later", after=task.payload["retry_after"])
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


# Callbacks that overrun their time limits (tests/e2e/test_time_limits.py). Each attempt of `sleepy` writes
# what it was (its process, when it started, whether an earlier attempt's process still lived) to a file in
# the payload's `dir`; its first attempt then never returns, the next ones return at once.
limited_lambdas = Lambdas()


def _record(task: TaskContext) -> None:
    folder = Path(task.payload["dir"])
    earlier = [json.loads(p.read_text()) for p in folder.glob(f"{task.id}.*.json")]
    others = [e["pid"] for e in earlier if e["pid"] != os.getpid() and alive(e["pid"])]
    seen = {"pid": os.getpid(), "started": time.time(), "overlaps": others}
    (folder / f"{task.id}.{task.attempt}.json").write_text(json.dumps(seen))


def alive(pid: int) -> bool:
    """Whether a process runs (a zombie, ended but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@limited_lambdas.register("sleepy")
def sleepy_forever(task: TaskContext) -> None:
    """On its first attempt, sleeps `seconds` (default: for ever)."""
    _record(task)
    if task.attempt == 1:
        time.sleep(float(task.payload.get("seconds", 1e9)))


limited_lambdas.register("work")(work)


async_limited_lambdas = Lambdas()


@async_limited_lambdas.register("sleepy")
async def sleepy_forever_async(task: TaskContext) -> None:
    """Awaits forever on its first attempt; with `block`, blocks its thread instead (deaf to cancelling)."""
    _record(task)
    try:
        while task.attempt == 1:
            if task.payload.get("block"):
                time.sleep(1)
            else:
                await asyncio.sleep(1)
    finally:  # cancelled: when it stopped
        Path(task.payload["dir"], f"{task.id}.{task.attempt}.ended").write_text(str(time.time()))


async_limited_lambdas.register("work")(work_async)
