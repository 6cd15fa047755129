"""Time limits: an attempt running longer than its limit is stopped, and fails retriably with a TaskTimeout.

The limit is the task's own `timeout_seconds`, else its lambda's (LambdaSpec.time_limit); none, no limit.

An `async def` callback is cancelled at its limit (asyncio.timeout, in async_callbacks): it fails like any
callback that raises, and its executor carries on. A thread cannot be stopped, so a sync callback over its
limit (or a coroutine that keeps running once cancelled, ASYNC_GRACE_S later) is stopped by ending its
executor process. The watcher here first records the attempt's failure, a write fenced by the attempt that
the heartbeats keep leased meanwhile, then ends the process; the retry waits at least RETRY_FLOOR_S, and the
process ends before that whether the write has answered or not, so the retry never overlaps the stopped
attempt. The host starts another executor in its place. The other tasks that process was running stop
with it, as after a crash: the host records each of their attempts as lost as the process's connections
close (attempt_ends.AttemptEnds.lost), and each runs again after its backoff, fenced by a higher attempt
number. A lambda run with one thread per executor keeps such tasks apart.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from atf_core.schema import Task
from atf_sdk.worker.health import EXIT_TIMED_OUT
from atf_sdk.worker.observe import task_context

log = logging.getLogger("atf.executor")
WATCH_EVERY_S = 0.05
ASYNC_GRACE_S = 0.5  # a cancelled coroutine's time to unwind before its process is ended
RETRY_FLOOR_S = 1.0  # the least delay before the retry of an attempt stopped by ending its process
# The process ends this long after the watcher starts its write at the latest, written or not: the retry's time
# is counted from just after that start, and a write slow to answer (a lost reply, botocore's retries) must not
# keep the stopped attempt running once its retry may be claimed.
END_BY_S = RETRY_FLOOR_S * 0.8


class TaskTimeout(Exception):
    """An attempt ran over its time limit: a retriable failure, kept in the task's errors."""

    def __init__(self, limit_s: float) -> None:
        super().__init__(f"ran over its time limit of {limit_s:g}s")
        self.limit_s = limit_s


def end_process(reason: str) -> None:
    """End this executor process at once: its overrunning callback stops with it."""
    log.error("terminating executor: %s", reason)
    logging.shutdown()
    os._exit(EXIT_TIMED_OUT)


@dataclass(frozen=True)
class _Limit:
    task: Task
    limit_s: float
    stop_at: float  # monotonic


class TimeLimits:
    """The limits of the attempts one executor process runs, and the watcher that enforces them.

    `overran(task, limit_s)` records the attempt's failure; `terminate` then ends the process.
    """

    def __init__(self, overran: Callable[[Task, float], None], terminate: Callable[[str], None] = end_process) -> None:
        self._overran = overran
        self._terminate = terminate
        self._limits: dict[str, _Limit] = {}
        self._taken: set[str] = set()  # attempts the watcher took over
        self._ended = threading.Event()  # set once `terminate` returned (it returns only in tests)
        self._ending = threading.Lock()  # the deadline and the write's end race to end the process: once
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def start(self, task: Task, limit_s: float | None) -> None:
        """Watch an attempt from now: ended at `limit_s` (no limit: not watched)."""
        if limit_s is not None:
            with self._lock:
                self._limits[task.id] = _Limit(task, limit_s, time.monotonic() + limit_s)

    def extend(self, task_id: str, grace_s: float) -> None:
        """Give a watched attempt `grace_s` more (a coroutine's time to unwind once cancelled at its limit)."""
        with self._lock:
            watched = self._limits.get(task_id)
            if watched is not None:
                self._limits[task_id] = replace(watched, stop_at=watched.stop_at + grace_s)

    def end(self, task_id: str) -> bool:
        """The attempt's callback returned: True if its result is the runner's to record, False if the
        watcher already took the attempt over (it records the timeout and ends the process)."""
        with self._lock:
            return self._limits.pop(task_id, None) is not None or task_id not in self._taken

    def wait_for_the_end(self) -> None:
        """Block the thread of an attempt the watcher took over until the process ends."""
        self._ended.wait()

    def run(self) -> None:
        while not self._stop.wait(WATCH_EVERY_S):
            self.enforce()

    def stop(self) -> None:
        self._stop.set()

    def enforce(self) -> None:
        """Stop every attempt past its limit: record its failure, then end the process."""
        now = time.monotonic()
        with self._lock:
            over = [entry for entry in self._limits.values() if entry.stop_at <= now]
            for entry in over:
                del self._limits[entry.task.id]
                self._taken.add(entry.task.id)
        for entry in over:
            self._stop_attempt(entry)

    def _stop_attempt(self, entry: _Limit) -> None:
        task = entry.task
        reason = f"task {task.id} attempt {task.attempt} ran over its time limit of {entry.limit_s:g}s"
        # Started before the write, whose retry is due RETRY_FLOOR_S after a moment taken after this: should
        # the write not have answered by END_BY_S, the process ends anyway. If it had not landed either, the
        # task runs again once its lease is gone, as after a crash.
        deadline = threading.Timer(END_BY_S, self._end, (reason,))
        deadline.daemon = True
        deadline.start()
        with task_context(task):  # this thread's lines, the failure's "task finished" too, carry the task's keys
            log.error("task %s attempt %d ran over its time limit of %gs", task.id, task.attempt, entry.limit_s)
            try:
                self._overran(task, entry.limit_s)
            finally:
                deadline.cancel()
                self._end(reason)

    def _end(self, reason: str) -> None:
        if self._ending.acquire(blocking=False):
            self._terminate(reason)
            self._ended.set()
