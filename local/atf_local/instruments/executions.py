"""When each callback ran, recorded by the callbacks the fault scenarios and the benchmarks register.

The executor itself records nothing: a registry of test callbacks writes a
`start` record as a callback begins and an `end` record as it returns or
raises (task id, attempt, pid), in the history of the executor process that
runs it (`executor-<pid>.jsonl`). The interval between them is the execution
the checker compares with every other execution of the task; an execution
whose process died has no end and lasts, for the checker, until the death.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from atf_local.instruments.history import History
from atf_sdk.worker.registry import Callback, Lambdas, TaskContext

_history: History | None = None


def execution_history() -> History:
    """This process's record of executions (ATF_HISTORY_DIR, read when the first callback runs)."""
    global _history
    if _history is None:
        _history = History.from_env("executor")
    return _history


def recorded(callback: Callback) -> Callback:
    def run(task: TaskContext) -> Any:
        history = execution_history()
        history.record("start", task=task.id, attempt=task.attempt)
        try:
            return callback(task)
        finally:
            history.record("end", task=task.id, attempt=task.attempt)

    return run


class RecordedLambdas(Lambdas):
    """A Lambdas registry whose callbacks record their start and end."""

    def register(self, name: str) -> Callable[[Callback], Callback]:
        add = super().register(name)

        def add_recorded(callback: Callback) -> Callback:
            add(recorded(callback))
            return callback

        return add_recorded
