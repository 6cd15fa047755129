"""The benchmarks' callbacks: no-op, so what is measured is the framework."""

from __future__ import annotations

from atf_sdk.worker.registry import Lambdas, TaskContext

lambdas = Lambdas()


@lambdas.register("noop")
def noop(task: TaskContext) -> None:
    return None
