"""The benchmarks' callbacks: no-op, so what is measured is the framework; each records its start and end
(start-lag is measured from the start record)."""

from __future__ import annotations

from atf_local.instruments.executions import RecordedLambdas
from atf_sdk.worker.registry import TaskContext

lambdas = RecordedLambdas()


@lambdas.register("noop")
def noop(task: TaskContext) -> None:
    return None
