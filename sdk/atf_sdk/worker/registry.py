"""How lambda owners write callbacks: a plain function, registered by name.

    lambdas = Lambdas()

    @lambdas.register("send_email")
    def send_email(task: TaskContext) -> None:
        mailer.send(**task.payload, fencing_token=task.attempt)

Return to succeed. Raise Retry (optionally with `after` seconds) to try again
later, Fatal to stop for good; any other exception counts as retriable.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from atf_core.schema import MAX_SCHEDULE_AHEAD, Task


@dataclass(frozen=True)
class TaskContext:
    """What a callback sees of its task.

    `attempt` rises with every execution and is the fencing token: pass it to
    downstream systems so a late write of an older execution can be refused.
    """

    id: str
    lambda_name: str
    payload: dict[str, Any]
    collection: str
    priority: str
    attempt: int
    max_attempts: int
    scheduled_at: datetime
    # A chain's link: what each of its parents returned, by link name (they all succeeded before it ran).
    parent_results: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, task: Task, parent_results: dict[str, Any] | None = None) -> TaskContext:
        return cls(
            id=task.id,
            lambda_name=task.lambda_,
            payload=task.payload,
            collection=task.collection,
            priority=task.priority,
            attempt=task.attempt,
            max_attempts=task.max_attempts,
            scheduled_at=task.scheduled_at,
            parent_results=parent_results or {},
        )


class Retry(Exception):
    """Run the task again later: after `after` (seconds, or a timedelta), or by the lambda's backoff.

    An `after` the task could not be retried after (a string, a negative or unbounded number, more than a year
    as a task may be scheduled ahead) raises here, in the callback, naming it: the attempt then fails with that
    error, as any other exception of the callback's, and is retried by the backoff."""

    def __init__(self, message: str = "retry requested", after: float | timedelta | None = None) -> None:
        super().__init__(message)
        self.after = None if after is None else _retry_delay(after)


def _retry_delay(after: object) -> float:
    seconds = after.total_seconds() if isinstance(after, timedelta) else after
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise TypeError(f"Retry after: seconds as a number or a timedelta, not {type(after).__name__} {after!r}")
    if not 0 <= seconds <= MAX_SCHEDULE_AHEAD.total_seconds():  # NaN fails this too
        raise ValueError(f"Retry after: {after!r} is not between 0 and {MAX_SCHEDULE_AHEAD.days} days in seconds")
    return float(seconds)


class Fatal(Exception):
    """Stop the task for good, with no further attempt: it waits as a dead_letter for an operator to redrive
    or discard it. A lambda configured with `dead_letter: false` ends it as fatal_failure instead. Either way
    the message is kept in the task's errors."""


# A callback may be `async def`: the executor awaits it (atf_sdk.worker.async_callbacks).
Callback = Callable[[TaskContext], Any]


class Lambdas:
    """The callbacks a worker host can run, by lambda name."""

    def __init__(self) -> None:
        self._callbacks: dict[str, Callback] = {}

    def register(self, name: str) -> Callable[[Callback], Callback]:
        def add(callback: Callback) -> Callback:
            if name in self._callbacks:
                raise ValueError(f"lambda {name!r} is registered twice")
            self._callbacks[name] = callback
            return callback

        return add

    def get(self, name: str) -> Callback:
        return self._callbacks[name]

    @property
    def names(self) -> list[str]:
        return sorted(self._callbacks)


def load_lambdas(spec: str) -> Lambdas:
    """Import 'package.module:attribute' and return the Lambdas it names."""
    module_name, _, attribute = spec.partition(":")
    found = getattr(importlib.import_module(module_name), attribute or "lambdas")
    if not isinstance(found, Lambdas):
        raise TypeError(f"{spec} is a {type(found).__name__}, not Lambdas")
    return found
