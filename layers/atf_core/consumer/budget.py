"""Backpressure: a bounded number of messages in flight per queue.

Each queue's depth is read from SQS now and then and estimated in between by
counting what this consumer sent, so a slow lambda's queue never grows
without bound and other lambdas keep their scheduling bandwidth.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from atf_core.consumer.tracker import QueueKey


@dataclass
class _Estimate:
    depth: int = 0
    sent_since: int = 0
    read_at: float = float("-inf")


class QueueBudget:
    def __init__(
        self,
        read_depth: Callable[[str, str], int],
        cap: int | Callable[[QueueKey], int],
        refresh_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read_depth = read_depth
        # A queue's cap may depend on its lambda (StackConfig.in_flight_cap_of): a callable gives it per queue.
        self._cap = cap if callable(cap) else (lambda _key: cap)
        self._refresh_s = refresh_s
        self._clock = clock
        self._estimates: dict[QueueKey, _Estimate] = {}

    def available(self, key: QueueKey, stretch: float = 1.0) -> int:
        """Room left in the queue under its cap (`stretch` times it)."""
        estimate = self._estimates.setdefault(key, _Estimate())
        cap = math.ceil(self._cap(key) * stretch)
        full = estimate.depth + estimate.sent_since >= cap
        # A full queue is read again soon: its workers may have drained it already,
        # and waiting the whole refresh period would cap throughput at cap / period.
        stale = self._clock() - estimate.read_at >= (self._refresh_s / 8 if full else self._refresh_s)
        if stale and (estimate.sent_since or estimate.depth or estimate.read_at == float("-inf")):
            estimate.depth = self._read_depth(*key)
            estimate.sent_since = 0
            estimate.read_at = self._clock()
        return max(0, cap - estimate.depth - estimate.sent_since)

    def spent(self, key: QueueKey, count: int) -> None:
        self._estimates.setdefault(key, _Estimate()).sent_since += count
