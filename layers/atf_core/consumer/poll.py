"""One poll's context, and what it did: one counter keyed by the consumer's metric names."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from atf_core.consumer.tracker import EntryKey, QueueKey
from atf_core.gating import GateView
from atf_core.schema import to_ms


class Event(StrEnum):
    """What a poll counts; functions/consumer/handler.py maps each one to its CloudWatch metric."""

    ENQUEUED = "enqueued"  # messages sent, re-enqueued tasks included
    REQUEUED = "requeued"
    DROPPED = "dropped"
    EXPIRED = "expired"
    EXHAUSTED = "exhausted"
    DEAD_LETTERED = "dead_lettered"  # exhausted into the dead letters (counted as exhausted too)
    SEND_FAILED = "send_failed"
    ERROR = "error"  # a queue's poll raised
    HOUSEKEEPING_FAILED = "housekeeping_failed"  # a chore (periodic schedules, the chain sweep) raised


@dataclass
class PollReport:
    counts: Counter[tuple[Event, QueueKey | None]] = field(default_factory=Counter)
    saturated: bool = False  # some queue took all the room it had: more may be due right away

    def count(self, event: Event, queue: QueueKey | None = None, n: int = 1) -> None:
        self.counts[event, queue] += n

    def total(self, event: Event) -> int:
        return sum(n for (counted, _), n in self.counts.items() if counted is event)


@dataclass
class Poll:
    """One pass over the queues: its moment, the gates in force, the entries it saw and what it did."""

    now: datetime
    gates: GateView
    lookahead_s: float  # entries due by now + this are read
    report: PollReport = field(default_factory=PollReport)
    seen: set[EntryKey] = field(default_factory=set)
    read_in_full: set[QueueKey] = field(default_factory=set)  # queues whose due entries were all read

    @property
    def now_ms(self) -> int:
        return to_ms(self.now)

    @property
    def up_to(self) -> datetime:
        return self.now + timedelta(seconds=self.lookahead_s)
