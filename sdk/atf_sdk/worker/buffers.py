"""The controller's local buffers: one per lambda, served highest priority first.

A message may arrive before its task is due (the consumer enqueues a little
early so tasks start on time); the buffer holds it until then.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from dataclasses import dataclass, field

from atf_core.queues import TaskMessage


@dataclass(order=True)
class Buffered:
    rank: int  # 0 is the highest priority
    due_ms: int
    seq: int
    message: TaskMessage = field(compare=False)
    queue_url: str = field(compare=False)
    receipt: str = field(compare=False)


class WorkBuffer:
    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._due: list[Buffered] = []  # heap by (rank, due, seq)
        self._held: list[tuple[int, int, Buffered]] = []  # heap by due time
        self._seq = itertools.count()
        self._cond = threading.Condition()

    @property
    def capacity(self) -> int:
        return self._capacity

    def room(self) -> int:
        with self._cond:
            return max(0, self._capacity - len(self._due) - len(self._held))

    def put(self, rank: int, message: TaskMessage, queue_url: str, receipt: str) -> None:
        item = Buffered(rank, message.due_ms, next(self._seq), message, queue_url, receipt)
        with self._cond:
            heapq.heappush(self._held, (item.due_ms, item.seq, item))
            self._cond.notify_all()

    def hold(self, item: Buffered, seconds: float) -> None:
        """Put a message back to be served again in `seconds` (a limit said not yet)."""
        item.due_ms = int((time.time() + seconds) * 1000)
        with self._cond:
            heapq.heappush(self._held, (item.due_ms, item.seq, item))
            self._cond.notify_all()

    def take(self, timeout_s: float) -> Buffered | None:
        """The highest-priority due message, waiting up to timeout_s for one."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                self._release_due()
                if self._due:
                    return heapq.heappop(self._due)
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(min(left, self._until_next_due()))

    def drain(self) -> list[Buffered]:
        with self._cond:
            items = list(self._due) + [entry[2] for entry in self._held]
            self._due.clear()
            self._held.clear()
            return items

    def _release_due(self) -> None:
        now_ms = int(time.time() * 1000)
        while self._held and self._held[0][0] <= now_ms:
            heapq.heappush(self._due, heapq.heappop(self._held)[2])

    def _until_next_due(self) -> float:
        if not self._held:
            return 0.5
        return max(0.001, (self._held[0][0] - time.time() * 1000) / 1000)
