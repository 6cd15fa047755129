"""Rate and concurrency limits per lambda and per collection, shared by every worker host.

A controller asks before it claims: a start takes a token from the current
window's counter (at most N starts a second) and a slot in the running set
(at most M at once), both conditional writes on small items in the task
table, so the caps hold across hosts. A slot is a lease that heartbeats
renew; the slot of a worker that died expires and is reclaimed, so a crash
cannot shrink the cap for good.

A lambda's key_limits apply the same caps to each flow-control key apart (a
scope per (lambda, flow_key)). Those items carry a TTL past their last lease
or window, so the millions of keys a lambda may see cost nothing once idle.
Over a key's rate a task waits (throttle) or, in rate_limit mode, is refused
for good: the controller ends it dropped with the reason.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from atf_core.config import KeyLimits, Limits, OverRate, StackConfig
from atf_core.store.counters import Counters, SlotTake
from atf_core.telemetry import Metric


@dataclass(frozen=True)
class Grant:
    """What a start took: the running slots to give back when the task ends, or when its claim is then
    refused. A slot the task held already (its message came twice) is not among them: it is the running
    attempt's, and giving it back would let the limit admit one more."""

    task_id: str
    slots: tuple[str, ...]


class KeyHold(StrEnum):
    """Which of a flow key's limits refused a start: what the controller counts and logs (per lambda)."""

    MAX_RUNNING = "max_running"  # the key runs its max_running already: the task waits
    THROTTLE = "throttle"  # over the key's max_starts_per_second: the task waits
    RATE_LIMIT = "rate_limit"  # over it, in rate_limit mode: the task ends dropped


# What a task its flow key held back counts in, by the limit that held it: per lambda and priority, never
# per key. The controller counts them (a drop in Dropped too); the dashboard draws them.
KEY_HOLD_METRICS = {
    KeyHold.MAX_RUNNING: Metric.KEY_WAITED,
    KeyHold.THROTTLE: Metric.KEY_THROTTLED,
    KeyHold.RATE_LIMIT: Metric.KEY_RATE_LIMITED,
}


@dataclass(frozen=True)
class Refusal:
    """Not now: ask again later, or (`drop`) never: the task ends dropped with `reason`. `key_hold` says
    which limit of the task's flow key refused it; None when a lambda's or collection's did."""

    reason: str
    drop: bool = False
    key_hold: KeyHold | None = None
    others_may_start: bool = False  # a collection's or a key's limit refused: other tasks of the lambda may start


# Idle counters of a key stay this long past their last lease or window before DynamoDB's TTL removes them.
IDLE_KEEP_S = 3600


def key_scope(lambda_name: str, flow_key: str) -> str:
    """The scope of one flow key ('#' is in neither a lambda's nor a key's characters: no clash)."""
    return f"{lambda_name}#{flow_key}"


class Limiter:
    def __init__(self, counters: Counters, config: StackConfig, clock: Any = time.time) -> None:
        self._counters = counters
        self._config = config
        self._clock = clock

    def scopes(self, lambda_name: str, collection: str, flow_key: str | None = None) -> list[tuple[str, Limits]]:
        spec = self._config.lambdas[lambda_name]
        found = [(lambda_name, spec.limits)]
        if collection in spec.collection_limits:
            found.append((f"{lambda_name}/{collection}", spec.collection_limits[collection]))
        if flow_key is not None and spec.key_limits is not None:
            found.append((key_scope(lambda_name, flow_key), spec.key_limits))
        return [(scope, limits) for scope, limits in found if limits.max_running or limits.max_starts_per_second]

    def limited(self, lambda_name: str) -> bool:
        spec = self._config.lambdas[lambda_name]
        return bool(self.scopes(lambda_name, "") or spec.collection_limits or spec.key_limits)

    def acquire(self, lambda_name: str, collection: str, task_id: str, flow_key: str | None = None) -> Grant | Refusal:
        """A grant to start this task now, or a refusal: wait and ask again, or (a key's rate limit) drop it.
        A refusal gives back what the scopes before the refusing one gave: a slot, and a start of their rate
        (a hot key's task asking again every LIMITED_RETRY_S would otherwise spend the lambda's starts)."""
        slots: list[str] = []
        starts: list[tuple[str, int]] = []
        try:
            for scope, limits in self.scopes(lambda_name, collection, flow_key):
                refusal = self._take(scope, limits, task_id, slots, starts)
                if refusal is not None:
                    self._undo(slots, starts, task_id)
                    # A narrower scope than the lambda's (a collection, a key) leaves the lambda's other tasks free
                    return replace(refusal, others_may_start=scope != lambda_name)
        except Exception:
            # A later scope's write failed (a throttle past botocore's retries): what the earlier ones took is
            # given back, or a slot would stay held, by no running task, until its lease lapses (as it does
            # where giving back fails too: the first error is the one raised)
            with contextlib.suppress(Exception):
                self._undo(slots, starts, task_id)
            raise
        return Grant(task_id, tuple(slots))

    def _undo(self, slots: list[str], starts: list[tuple[str, int]], task_id: str) -> None:
        self._give_back(slots, task_id)
        for counted in starts:
            self._counters.give_back_start(*counted)

    def _take(
        self, scope: str, limits: Limits, task_id: str, slots: list[str], starts: list[tuple[str, int]]
    ) -> Refusal | None:
        """One scope's slot and start, added to `slots` and `starts` as taken; or its refusal."""
        keyed = isinstance(limits, KeyLimits)
        if limits.max_running:
            took = self._take_slot(scope, task_id, limits.max_running)
            if took is SlotTake.FULL:
                return Refusal(
                    f"{_named(scope)} runs {limits.max_running} at most",
                    key_hold=KeyHold.MAX_RUNNING if keyed else None,
                )
            if took is SlotTake.TAKEN:
                slots.append(scope)
        if limits.max_starts_per_second:
            window = self._take_token(scope, limits.max_starts_per_second)
            if window is None:
                drop = isinstance(limits, KeyLimits) and limits.over_rate is OverRate.RATE_LIMIT
                hold = (KeyHold.RATE_LIMIT if drop else KeyHold.THROTTLE) if keyed else None
                reason = f"over the rate of {_named(scope)} ({limits.max_starts_per_second:g} starts/s)"
                return Refusal(reason, drop, hold)
            starts.append((scope, window))
        return None

    def grant_for(self, lambda_name: str, collection: str, task_id: str, flow_key: str | None = None) -> Grant:
        """The slots a running task holds, as its executor sees them."""
        scopes = self.scopes(lambda_name, collection, flow_key)
        return Grant(task_id, tuple(scope for scope, limits in scopes if limits.max_running))

    def release(self, grant: Grant) -> None:
        self._give_back(list(grant.slots), grant.task_id)

    def renew(self, grant: Grant) -> None:
        lease_ms = self._lease_until_ms()
        for scope in grant.slots:
            self._counters.renew_slot(scope, grant.task_id, lease_ms, _expires(lease_ms))

    # -- starts per second -----------------------------------------------------
    def _take_token(self, scope: str, per_second: float) -> int | None:
        """Count a start in the scope's current window; the window's start (epoch s), or None if it is full."""
        window = max(1, math.ceil(1 / per_second))  # slow rates count over a longer window
        allowed = max(1, math.floor(per_second * window))
        start = int(self._clock()) // window * window
        return start if self._counters.take_start(scope, start, allowed, expires=start + window + IDLE_KEEP_S) else None

    # -- running at once ---------------------------------------------------------
    def _take_slot(self, scope: str, task_id: str, max_running: int) -> SlotTake:
        self._counters.open_slots(scope)
        for _ in range(2):
            lease_ms = self._lease_until_ms()
            took = self._counters.take_slot(scope, task_id, lease_ms, max_running, _expires(lease_ms))
            if took is not SlotTake.FULL or not self._reclaim_expired(scope):
                return took
        return SlotTake.FULL

    def _reclaim_expired(self, scope: str) -> bool:
        """Drop slots whose lease ran out (their workers died); True if any was freed."""
        now_ms = int(self._clock() * 1000)
        freed = False
        for task_id, lease_ms in self._counters.slots(scope).items():
            if lease_ms < now_ms:
                freed |= self._counters.free_slot(scope, task_id, lease_ms)
        return freed

    def _give_back(self, scopes: list[str], task_id: str) -> None:
        for scope in scopes:
            self._counters.free_slot(scope, task_id)

    def _lease_until_ms(self) -> int:
        timeouts = self._config.timeouts
        return int((self._clock() + max(timeouts.heartbeat, timeouts.claim)) * 1000)


def _expires(lease_ms: int) -> int:
    """When a slots item may go (epoch s): an hour past the lease it was last given. A holder renews it with
    every heartbeat, so only the item of a scope nobody has run in for that long ever goes."""
    return lease_ms // 1000 + IDLE_KEEP_S


def _named(scope: str) -> str:
    lambda_name, hash_, flow_key = scope.partition("#")
    return f"flow key {flow_key!r} of {lambda_name}" if hash_ else f"limit scope {scope}"
