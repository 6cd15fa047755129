"""Heartbeats for the tasks one executor process is running.

Every heartbeat is a conditional write fenced by the attempt. Three failed
heartbeats in a row (or a lease this process can no longer prove, say after
it was paused) and the process kills itself: the heartbeat timeout exceeds
three intervals plus the retry budget of one call, so by the time the
consumer may re-enqueue the task, this execution has stopped.

The consumer may re-enqueue a task once it has watched its last stamp stay
unchanged for the lease floor, and a stamp can land as soon as its call is
sent. So a lease counts from the sending of the claim or of the last heartbeat
that landed, and a watchdog (not the beat loop, which a hung call holds up)
ends the process a margin before the floor runs out.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from atf_core import lifecycle
from atf_core.clock import Clock
from atf_core.config import MISSES_ALLOWED, Timeouts
from atf_core.schema import Task, utcnow
from atf_core.store.base import Change, TaskRef, TaskStore

log = logging.getLogger("atf.executor")
EXIT_LOST_LEASE = 70
WATCH_EVERY_S = 0.1
LEASE_MARGIN_S = 0.5  # the watchdog's own lateness, and the time a process takes to die


@dataclass
class _Running:
    task: Task
    ref: TaskRef
    attempt: int
    last_ok: float  # monotonic time the claim, or the last heartbeat that landed, was sent
    misses: int = 0
    entry_due: datetime | None = None  # where this process last moved the task's index entry


def die(reason: str) -> None:
    """End this executor process at once: what a lost lease does."""
    log.error("terminating executor: %s", reason)
    logging.shutdown()
    os._exit(EXIT_LOST_LEASE)


class Heartbeats:
    def __init__(
        self,
        store: TaskStore,
        timeouts: Timeouts,
        terminate: Callable[[str], None] = die,
        on_beat: Callable[[Task], None] | None = None,
        clock: Clock = utcnow,
    ) -> None:
        self._store = store
        self._clock = clock
        self._timeouts = timeouts
        self._terminate = terminate
        self._on_beat = on_beat  # after each successful heartbeat: renew what the task holds (its limit slots)
        self._running: dict[str, _Running] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        # Renewals wait here for their own thread: a slow one (a throttled slots item) must not delay the
        # next task's heartbeat, on which the lease, and the process, depend. One per task: the latest beat's.
        self._to_renew: dict[str, Task] = {}
        self._renewals_due = threading.Event()

    def track(self, task: Task) -> bool:
        """Heartbeat this attempt from now on; False, and it is not tracked, where its lease ran out before it
        got here (it must not start, and it runs again once its claim times out: the process and the other
        tasks it runs go on). A lease so short that the next round could come too late is renewed first."""
        # The lease began at the claim (the controller is on this host, on this clock), not
        # when this thread got the task: a process paused while its controller handed it a
        # task must not start it once the lease is gone.
        age = max(0.0, (self._clock() - task.claimed_at).total_seconds()) if task.claimed_at else 0.0
        entry = _Running(task, TaskRef.of(task), task.attempt, time.monotonic() - age)
        if self._expired(entry) or (self._short(entry) and not self._renewed_first(entry)):
            log.warning(
                "task %s attempt %d was handed over %.1fs after its claim: not started", task.id, task.attempt, age
            )
            return False
        with self._lock:
            self._running[task.id] = entry
        return True

    def _short(self, entry: _Running) -> bool:
        """Whether the lease left is shorter than a round of beats and the longest one beat can take."""
        left = self._timeouts.lease_floor - LEASE_MARGIN_S - (time.monotonic() - entry.last_ok)
        return left < self._timeouts.heartbeat_interval + self._timeouts.call_budget

    def _renewed_first(self, entry: _Running) -> bool:
        """One heartbeat before the task starts; whether it landed."""
        try:
            return self._write_beat(entry)
        except Exception as error:  # noqa: BLE001 - not started: the claim times out and it runs again
            log.warning("heartbeat for %s failed before its start: %s: %s", entry.ref.id, type(error).__name__, error)
            return False

    def untrack(self, task: Task) -> None:
        """Stop heartbeating this attempt; a later attempt of the task this process already runs (its retry,
        claimed while this one's thread still finished) stays tracked."""
        with self._lock:
            entry = self._running.get(task.id)
            if entry is not None and entry.attempt == task.attempt:
                del self._running[task.id]

    def run(self) -> None:
        threading.Thread(target=self._watch, daemon=True, name="lease-watchdog").start()
        if self._on_beat is not None:
            threading.Thread(target=self._renew_as_due, daemon=True, name="slot-renewals").start()
        interval = self._timeouts.heartbeat_interval
        while not self._stop.wait(interval):
            self.beat_all()

    def beat_all(self) -> None:
        """One round: a heartbeat for every task this process runs."""
        with self._lock:
            running = list(self._running.values())
        for entry in running:
            self._beat(entry)

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(WATCH_EVERY_S):
            with self._lock:
                running = list(self._running.values())
            for entry in running:
                if self._expired(entry):
                    silent_for = time.monotonic() - entry.last_ok
                    self._terminate(f"no heartbeat landed for {silent_for:.1f}s on task {entry.ref.id}")

    def _expired(self, entry: _Running) -> bool:
        return time.monotonic() - entry.last_ok > self._timeouts.lease_floor - LEASE_MARGIN_S

    def _beat(self, entry: _Running) -> None:
        # A lease this process cannot prove (it was paused, or its clock jumped)
        # is treated as lost before anything else happens.
        silent_for = time.monotonic() - entry.last_ok
        if self._expired(entry):
            self._terminate(f"no successful heartbeat for {silent_for:.1f}s on task {entry.ref.id}")
            return
        try:
            landed = self._write_beat(entry)
        except Exception as error:  # noqa: BLE001 - a miss; three in a row end the process
            self._missed(entry, f"{type(error).__name__}: {error}")
            return
        if not landed and self._still_running(entry):
            # The task moved on without us (re-enqueued, or its attempt changed): stop now.
            self._terminate(f"lease on task {entry.ref.id} attempt {entry.attempt} was lost")

    def _write_beat(self, entry: _Running) -> bool:
        """One heartbeat of the entry's attempt; whether it landed (what the write raises, raised)."""
        now = self._clock()
        next_at = now + timedelta(seconds=self._timeouts.heartbeat)
        moves = lifecycle.heartbeat_moves_entry(entry.entry_due, now, self._timeouts.heartbeat)
        transition = lifecycle.HEARTBEAT if moves else lifecycle.HEARTBEAT_STAMP
        change = Change(now=now, attempt=entry.attempt, next_at=next_at)
        sent = time.monotonic()
        outcome = self._store.transition(entry.ref, transition, change)
        if not outcome.applied:
            return False
        entry.last_ok, entry.misses = sent, 0
        if moves:
            entry.entry_due = next_at
        if self._on_beat is not None:
            with self._lock:
                self._to_renew[entry.ref.id] = entry.task
            self._renewals_due.set()
        return True

    def _renew_as_due(self) -> None:
        while not self._stop.is_set():
            if self._renewals_due.wait(WATCH_EVERY_S):
                self.renew_pending()

    def renew_pending(self) -> None:
        """Renew what the tasks heartbeated since the last call hold."""
        with self._lock:
            self._renewals_due.clear()
            due, self._to_renew = list(self._to_renew.values()), {}
        for task in due:
            try:
                self._on_beat(task)  # type: ignore[misc]
            except Exception:  # noqa: BLE001 - a lapsed slot only lets the limit admit one more
                log.warning("renewing the running slot of %s failed", task.id)

    def _missed(self, entry: _Running, why: str) -> None:
        entry.misses += 1
        log.warning("heartbeat %d/%d for %s failed: %s", entry.misses, MISSES_ALLOWED, entry.ref.id, why)
        if entry.misses >= MISSES_ALLOWED:
            self._terminate(f"{MISSES_ALLOWED} consecutive heartbeats failed for task {entry.ref.id}")

    def _still_running(self, entry: _Running) -> bool:
        with self._lock:
            return self._running.get(entry.ref.id) is entry
