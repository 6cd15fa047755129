"""The controller's local buffers: one per lambda, served highest priority first.

A message may arrive before its task is due (the consumer enqueues a little
early so tasks start on time); the buffer holds it until then.

Priority order holds across the buffer and the queues, not only inside the
buffer: a low-priority message already buffered must not beat a high one still
in SQS. So
- a priority's room counts only the messages of that priority and higher: a
  higher priority's receive may bring in more than the capacity, and the
  lowest-priority messages it pushes out go back to SQS (the controller makes
  them visible again, for this host or another);
- while a higher priority's queue may hold more (its last receive brought
  something in, or it has not been read yet) and its receiver has room to fetch
  it, lower-priority messages are neither received nor handed out. What ends the
  wait is that receiver's next receive, a short one (WaitTimeSeconds 0): it
  brings the rest in, or finds the queue empty. (SQS answers a short receive
  from a sample of its servers, so on AWS an empty answer can come early and
  the order is kept nearly rather than strictly; moto's answer is exact.)
- a lambda's pause leaves what its queues hold unknown: after it, each higher
  priority is read first again.

A message that came early (its task is not due yet) does not use the capacity:
early ones have an allowance of their own, as large again. The consumer sends
each pass's tasks up to its lookahead ahead, several batches at once, and SQS
keeps no order; with one capacity for both, a buffer filled with tasks due
later kept the ones due now waiting in SQS (in the start-lag benchmark, the
slowest 5% of starts were received 350 ms after they were due).

A host receives for the executor threads waiting for work, not up to its capacity (the controller's
prefetch, 0 by default, adds that many): one whose threads are all busy receives nothing and leaves the
queue to idle hosts, and a due message that no thread comes for within half a second (one that came early,
received while a thread was idle) goes back to SQS for them (stranded).

Within a priority, due messages are handed out in turns between flows (a
collection and a flow key, as the consumer takes turns between them): a key's
backlog received in one go does not run before another key's task that came
with it or after it. Each flow's next turn is counted from the last turn handed
out, so a flow that was idle starts at once rather than after what the busy
flows have had.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from atf_core.queues import TaskMessage
from atf_core.store.base import Flow

BATCH = 10  # SQS's most messages per receive


@dataclass(order=True)
class Buffered:
    rank: int  # 0 is the highest priority
    due_ms: int
    seq: int
    message: TaskMessage = field(compare=False)
    queue_url: str = field(compare=False)
    receipt: str = field(compare=False)
    received_at: float = field(default_factory=time.monotonic, compare=False)  # monotonic, on this host
    offered: bool = field(default=False, compare=False)  # taken once and put back (a limit said not yet)


@dataclass(frozen=True)
class Received:
    """One message as a receive returned it."""

    message: TaskMessage
    queue_url: str
    receipt: str


class WorkBuffer:
    def __init__(self, capacity: int, ranks: int = 1, parts: int = 1, prefetch: int | None = None) -> None:
        self._capacity = capacity
        # With `prefetch`, a receive asks for no more than the executor threads waiting for work (in take) and
        # `prefetch` beyond them, less the due messages buffered (_wanted): a busy host leaves the queue's
        # messages to idle hosts rather than holding them behind its running tasks. None: up to the capacity,
        # whoever waits.
        self._prefetch = prefetch
        self._waiting = 0
        self._due: list[tuple[int, int, int, int, Buffered]] = []  # heap by (rank, turn, due, seq)
        self._next_turn: dict[tuple[int, Flow], int] = {}  # a flow's next turn in its priority
        self._served = [0] * ranks  # the turn last handed out, per priority
        self._held: list[tuple[int, int, Buffered]] = []  # heap by due time
        self._seq = itertools.count()
        self._cond = threading.Condition()
        # Per priority: its queue may hold more than its receiver brought in. Unknown at first, so a
        # lower priority waits for each higher one's first (short) receive. The lowest never holds
        # anything back, so it never needs the follow-up receive. A priority split over several queues
        # (`parts`) may hold more while any of them may.
        self._more = [[rank < ranks - 1] * parts for rank in range(ranks)]

    @property
    def capacity(self) -> int:
        return self._capacity

    def room(self, rank: int | None = None) -> int:
        """Free places for messages of this priority (lower ones make way); of any priority without one."""
        with self._cond:
            return self._room(len(self._more) if rank is None else rank)

    def batch(self, rank: int) -> int:
        """How many messages a receive of this priority should ask for now; 0: not now."""
        with self._cond:
            if self._deferred(rank) or not self._fits(rank):
                return 0
            return min(BATCH, self._room(rank), self._wanted(rank))

    def expects_more(self, rank: int, part: int = 0) -> bool:
        """Whether this priority's queue may still hold messages: its next receive need not wait for any."""
        with self._cond:
            return self._more[rank][part]

    def may_hold_more(self, rank: int, more: bool, part: int = 0) -> None:
        """What a receiver learnt of its queue without taking anything in (a failed receive: False)."""
        more = more and rank < len(self._more) - 1
        with self._cond:
            if self._more[rank][part] != more:
                self._more[rank][part] = more
                self._cond.notify_all()

    def put_many(self, rank: int, received: Iterable[Received], more: bool, part: int = 0) -> list[Buffered]:
        """What one receive of this priority brought in; returns the lower-priority messages it pushed
        out of a full buffer, for the caller to hand back to SQS."""
        with self._cond:
            for item in received:
                self._push(
                    Buffered(rank, item.message.due_ms, next(self._seq), item.message, item.queue_url, item.receipt)
                )
            self._more[rank][part] = more and rank < len(self._more) - 1
            evicted = self._evict()
            self._cond.notify_all()
        return evicted

    def hold(self, item: Buffered, seconds: float) -> None:
        """Put a message back to be served again in `seconds` (a limit said not yet)."""
        item.due_ms = int((time.time() + seconds) * 1000)
        item.offered = True
        with self._cond:
            self._push(item)

    def take(self, timeout_s: float) -> Buffered | None:
        """The highest-priority due message, waiting up to timeout_s for one."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            self._waiting += 1
            try:
                while True:
                    self._release_due()
                    # The best due message is of the highest priority here: if it must wait, so must the rest.
                    if self._due and not self._deferred(self._due[0][0]):
                        return self._pop_turn()
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return None
                    self._cond.wait(min(left, self._until_next_due()))
            finally:
                self._waiting -= 1

    def stranded(self, after_s: float) -> list[Buffered]:
        """The due messages that have waited here `after_s` (since they came in and since they came due) while
        no thread waits for work, taken out for the caller to hand back to SQS: an early message received while
        a thread was idle may come due once every thread is busy, and another host may have one free. Only
        without a prefetch: a host given one keeps that many behind its running tasks, as it was told."""
        with self._cond:
            if self._waiting or self._prefetch != 0:
                return []
            self._release_due()
            now, now_ms = time.monotonic(), int(time.time() * 1000)
            out = [
                entry[-1]
                for entry in self._due
                if not entry[-1].offered  # waits on a limit: another host would meet the same
                and now - entry[-1].received_at >= after_s
                and now_ms - entry[-1].due_ms >= after_s * 1000
            ]
            if out:
                gone = {id(item) for item in out}
                self._due = [entry for entry in self._due if id(entry[-1]) not in gone]
                heapq.heapify(self._due)
            return out

    def drain(self) -> list[Buffered]:
        with self._cond:
            items = self._items()
            self._due.clear()
            self._held.clear()
            self._next_turn.clear()
            return items

    def _push(self, item: Buffered) -> None:
        heapq.heappush(self._held, (item.due_ms, item.seq, item))
        self._cond.notify_all()

    def _items(self) -> list[Buffered]:
        return [entry[-1] for entry in self._due] + [entry[2] for entry in self._held]

    def _room(self, rank: int) -> int:
        """Places for messages of this priority: the capacity, less what this priority and the higher ones hold
        due; what they hold early has an allowance of its own, as large again."""
        counted = [item for item in self._items() if item.rank <= rank]
        due = _due_now(counted)
        return max(0, min(self._capacity - len(due), 2 * self._capacity - len(counted)))

    def _wanted(self, rank: int) -> int:
        """How many more messages of this priority the threads waiting here (and the prefetch) would take: what
        is buffered due of it and the higher ones goes to them first. Early messages (the consumer's lookahead)
        are not counted: held until due, they keep starts on time (counted, they kept due ones in SQS until
        they fell due), and a host whose threads are all busy receives none, as nothing waits here."""
        if self._prefetch is None:
            return BATCH
        # A message a limit put back is not counted either: it waits on the limit, not for a thread, and counted
        # it would keep the lambda's other tasks in SQS (_defer sends a backlog of them back to the index)
        due = [item for item in _due_now(self._items()) if item.rank <= rank and not item.offered]
        return max(0, self._waiting + self._prefetch - len(due))  # stranded() hands back what no thread came for

    def _fits(self, rank: int) -> bool:
        """Ask only when a full batch fits (or nothing of this priority or above is here): fewer, fuller receives."""
        return self._room(rank) >= min(BATCH, self._capacity)

    def _deferred(self, rank: int) -> bool:
        """A higher priority's queue may hold more and its receiver is free to fetch it: this one waits."""
        return any(any(self._more[higher]) and self._fits(higher) for higher in range(min(rank, len(self._more))))

    def _evict(self) -> list[Buffered]:
        """Past the capacity (of due messages, or twice it in all), the lowest-priority messages due last make
        way."""
        items = sorted(self._items(), reverse=True)
        evicted = items[: max(0, len(items) - 2 * self._capacity)]
        due = _due_now(items[len(evicted) :])
        evicted += due[: max(0, len(due) - self._capacity)]
        if not evicted:
            return []
        gone = {id(item) for item in evicted}
        self._due = [entry for entry in self._due if id(entry[-1]) not in gone]
        self._held = [entry for entry in self._held if id(entry[2]) not in gone]
        heapq.heapify(self._due)
        heapq.heapify(self._held)
        return evicted

    def _release_due(self) -> None:
        now_ms = int(time.time() * 1000)
        while self._held and self._held[0][0] <= now_ms:
            item = heapq.heappop(self._held)[2]
            ranked_flow = (item.rank, item.message.flow)
            turn = max(self._next_turn.get(ranked_flow, 0), self._served[item.rank])
            self._next_turn[ranked_flow] = turn + 1
            heapq.heappush(self._due, (item.rank, turn, item.due_ms, item.seq, item))

    def _pop_turn(self) -> Buffered:
        rank, turn, *_, item = heapq.heappop(self._due)
        self._served[rank] = max(self._served[rank], turn)
        if len(self._next_turn) > 2 * len(self._due) + 64:
            # Forget the flows with nothing waiting, so that millions of keys over a host's life do not
            # pile up here. One that comes back starts from the turn last handed out: at most one turn
            # early in the round it left.
            waiting = {(entry[0], entry[-1].message.flow) for entry in self._due}
            self._next_turn = {f: t for f, t in self._next_turn.items() if f in waiting}
        return item

    def _until_next_due(self) -> float:
        if not self._held:
            return 0.5
        return max(0.001, (self._held[0][0] - time.time() * 1000) / 1000)


def _due_now(items: list[Buffered]) -> list[Buffered]:
    """The messages whose tasks are due: the rest came early (the consumer enqueues ahead)."""
    now_ms = int(time.time() * 1000)
    return [item for item in items if item.message.due_ms <= now_ms]
