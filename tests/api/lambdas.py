"""Callbacks the live API tests run on a real worker host.

Failures are driven by the payload and keyed on the attempt number, the
stand-in for a bug fixed between one run and the next: a task that fails
until attempt N succeeds once a redrive or a retry has brought it there.
"""

from __future__ import annotations

from typing import Any

from atf_sdk.worker.registry import Fatal, Lambdas, TaskContext

lambdas = Lambdas()


@lambdas.register("flaky")
def flaky(task: TaskContext) -> Any:
    """Raises ValueError (retriable) until attempt `works_from`; then returns `returns` (with `bytes`, a
    string of that many; with `unkept`, a set, which JSON cannot carry)."""
    if task.attempt < int(task.payload.get("works_from", 1)):
        raise ValueError(f"attempt {task.attempt} fails on purpose")
    if "bytes" in task.payload:
        return "x" * int(task.payload["bytes"])
    if task.payload.get("unkept"):
        return {1, 2}
    return task.payload.get("returns")


@lambdas.register("step")
def step(task: TaskContext) -> Any:
    """A chain link: raises Fatal (straight to the dead letters) until attempt `works_from`; then returns
    `returns`, or with `echo` what its parents returned."""
    if task.attempt < int(task.payload.get("works_from", 1)):
        raise Fatal(f"attempt {task.attempt}: this input cannot work yet")
    return task.parent_results if task.payload.get("echo") else task.payload.get("returns")


@lambdas.register("tick")
def tick(task: TaskContext) -> None:
    """What a periodic schedule runs: nothing, quickly."""
