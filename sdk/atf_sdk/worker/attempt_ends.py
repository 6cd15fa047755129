"""How an attempt's end is recorded: one write fenced by the attempt, the metrics it counts, and what follows it
(the task's limit slots given back, its chain advanced).

Two writers share it. The executor that ran the attempt records how its callback ended. The host records the
end of an attempt whose executor process died while it held the task (killed, out of memory, a crash in native
code): it sees that at once, as the executor's connection closes, so the task is retried after its backoff
instead of once its lease lapses. The host's write is fenced by the same attempt, so it is refused when the
executor recorded its end before it died, or when the task has already moved on.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from datetime import timedelta
from enum import StrEnum
from typing import TYPE_CHECKING

from atf_core import lifecycle
from atf_core.backoff import equal_jitter
from atf_core.chains import Chains
from atf_core.clock import Clock
from atf_core.config import StackConfig
from atf_core.limits import Limiter
from atf_core.schema import LOST_EXECUTION, Task, TaskError
from atf_core.store.base import Change, TaskRef, TaskStore
from atf_core.store.counters import Counters
from atf_core.store.items import ItemStore
from atf_core.telemetry import Metric, MetricBuffer, queue

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

log = logging.getLogger("atf.executor")
REPORT_TRIES = 5
# How long the host waits before it records the loss of an attempt past its time limit: the watcher's write was
# sent at most time_limits.END_BY_S before the process ended, and may still be on its way.
OVERRAN_GRACE_S = 3.0
# The metrics a recorded end counts once its write applies: a fatal failure counts
# as one whether or not the lambda keeps its dead letters.
OUTCOME_METRICS = {
    lifecycle.SUCCEED.name: (Metric.SUCCEEDED,),
    lifecycle.FAIL_RETRIABLE.name: (Metric.RETRIABLE_FAILURES,),
    lifecycle.FAIL_FATAL.name: (Metric.FATAL_FAILURES,),
    lifecycle.FAIL_TO_DEAD_LETTER.name: (Metric.FATAL_FAILURES, Metric.DEAD_LETTERED),
}


class Recorded(StrEnum):
    APPLIED = "applied"
    MOVED_ON = "moved_on"  # refused: the attempt's end was recorded already, or a later attempt holds the task
    UNANSWERED = "unanswered"  # every try failed: the lease lapses and the task runs again


AfterFinish = Callable[[Task, bool], None]


class AttemptEnds:
    """Records attempts' ends in the task store."""

    def __init__(
        self,
        store: TaskStore,
        config: StackConfig,
        metrics: MetricBuffer,
        clock: Clock,
        after_finish: AfterFinish | None = None,
    ) -> None:
        self._store = store
        self._config = config
        self._metrics = metrics
        self._clock = clock
        # What follows an end (its limit slots back, its chain advanced: `after_finish()` below); told whether the
        # task had moved on without it (its end refused: a later attempt holds the task, and its slots).
        self.after_finish: AfterFinish = after_finish or (lambda task, moved_on: None)

    def fatal(self, task: Task) -> lifecycle.Transition:
        """Where a task that failed for good goes: the dead letters, unless its lambda opts out."""
        return lifecycle.FAIL_TO_DEAD_LETTER if self._config.lambdas[task.lambda_].dead_letter else lifecycle.FAIL_FATAL

    def failing(self, task: Task, after: float | None, floor_s: float = 0.0) -> tuple[lifecycle.Transition, float]:
        """Where a failed attempt takes its task, and in how many seconds it may run again: its last attempt
        fails it for good (to the dead letters, unless its lambda opts out); any other retries it after `after`,
        else after the backoff, and `floor_s` at the least."""
        if task.attempt >= task.max_attempts:
            return self.fatal(task), 0.0
        timeouts = self._config.timeouts
        delay = (
            after
            if after is not None
            else equal_jitter(task.attempt, timeouts.backoff_base, timeouts.backoff_max, random.random())
        )
        return lifecycle.FAIL_RETRIABLE, max(delay, floor_s)

    def record(self, task: Task, transition: lifecycle.Transition, change: Change) -> Recorded:
        """Write the end, retrying a write that raised (the same writer token makes a retry safe)."""
        for _ in range(REPORT_TRIES):
            try:
                outcome = self._store.transition(TaskRef.of(task), transition, change)
            except Exception:  # noqa: BLE001 - retried, then left to the lease
                log.warning("reporting %s for %s failed; retrying", transition.name, task.id)
                continue
            if not outcome.applied:
                log.warning(
                    "result %s of %s attempt %d refused: the task moved on", transition.name, task.id, task.attempt
                )
                return Recorded.MOVED_ON
            for metric in OUTCOME_METRICS.get(transition.name, ()):
                self._metrics.count(metric, 1, queue(task.lambda_, task.priority))
            log.info("task finished", extra={"outcome": transition.target.value})
            return Recorded.APPLIED
        log.error("could not report %s for %s; its lease will expire and it will run again", transition.name, task.id)
        return Recorded.UNANSWERED

    def lost(self, task: Task, how: str, held_s: float) -> None:
        """Record the end of an attempt whose executor process died holding it for `held_s`: a failure
        (LostExecution, `how` it was seen), retried after the backoff or failed for good if it was the last. Its
        slots are given back and its chain advanced only if the write applied: a refused one was the executor's
        to follow. An attempt past its time limit is the time-limit watcher's to record: its write (a
        TaskTimeout) left before the process ended, so this one waits for it to land first."""
        limit_s = self._config.lambdas[task.lambda_].time_limit(task.timeout_seconds)
        if limit_s is not None and held_s >= limit_s:
            time.sleep(OVERRAN_GRACE_S)
        transition, delay = self.failing(task, None)
        now = self._clock()
        message = f"attempt {task.attempt} was lost: {how}"
        error = TaskError(type=LOST_EXECUTION, message=message, attempt=task.attempt, at=now, host=task.claimed_by)
        change = Change(now=now, attempt=task.attempt, next_at=now + timedelta(seconds=delay), error=error)
        if self.record(task, transition, change) is Recorded.APPLIED:
            try:
                self.after_finish(task, False)
            except Exception:
                log.warning("after-finish work for %s failed", task.id, exc_info=True)


def limits_and_chains(
    store: TaskStore, dynamodb: DynamoDBClient, config: StackConfig, clock: Clock
) -> tuple[Limiter, Chains]:
    """The limit slots an attempt's end gives back, and the chains it advances."""
    limiter = Limiter(Counters(dynamodb, config.table_name), config)
    return limiter, Chains(store, ItemStore(dynamodb, config.table_name), config, clock)


def after_finish(limiter: Limiter, chains: Chains) -> AfterFinish:
    """Give back the task's running slots, and let its chain carry on if it was a link. A task that moved on
    (its lease lapsed, and it runs again) keeps its slots: held by task id, they are its later attempt's."""

    def after(task: Task, moved_on: bool) -> None:
        grant = limiter.grant_for(task.lambda_, task.collection, task.id, task.flow_key)
        if grant.slots and not moved_on:
            limiter.release(grant)
        if task.chain is not None:
            chains.advance(task.chain)

    return after
