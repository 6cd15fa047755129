"""Changing a task that no executor has claimed: its run time, priority or payload (lifecycle.AMEND).

One conditional write, fenced by the attempt the caller read, so a task claimed in the meantime refuses
the change. Where the entry goes decides what happens to a message the consumer already sent for the
old entry: the claim accepts a message only for the task's current priority and for an entry no later
than the one it was sent for, so a later time or another priority makes it stale (the controller drops
it), and the consumer sends the task again from its new entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from atf_core import lifecycle
from atf_core.config import StackConfig
from atf_core.errors import InputError, UnknownPriority
from atf_core.schema import MAX_SCHEDULE_AHEAD, Task, encode_payload
from atf_core.store.base import Change, Outcome, TaskRef, TaskStore

ONE_MS = timedelta(milliseconds=1)


@dataclass(frozen=True)
class Amendment:
    """What to change; None leaves it as it is."""

    run_at: datetime | None = None
    priority: str | None = None
    payload: dict[str, Any] | None = None
    when_field: str = "run_at"  # what the request called the run time (delay_seconds): what its errors name

    @property
    def empty(self) -> bool:
        return self.run_at is None and self.priority is None and self.payload is None


def check_priority(config: StackConfig, lambda_name: str, priority: str) -> None:
    priorities = config.lambda_named(lambda_name).priorities
    if priority not in priorities:
        raise UnknownPriority(f"priority {priority!r} is not one of {lambda_name}'s {priorities}", "priority")


def check_run_at(run_at: datetime, now: datetime, field: str = "run_at") -> None:
    """A run time at most a year ahead, and at most a year back: one decades back is a caller's bug (a zero
    timestamp, a wrong unit) rather than a wish to run now, and a bulk action's time window starts in 1970."""
    if run_at - now > MAX_SCHEDULE_AHEAD:
        raise InputError(f"{field} is more than a year ahead", field)
    if now - run_at > MAX_SCHEDULE_AHEAD:
        raise InputError(f"{field} is more than a year back", field)


def dripped(first: datetime, count: int, per_second: float | None, after: int = 0) -> list[datetime]:
    """When each of `count` tasks goes: the n-th (after / per_second + n / per_second) seconds after `first`, or
    all at `first`; `after` is how many earlier calls dripped (a bulk cursor's). A rate so slow that the last
    would go more than a year after the first is refused here, before a time that far (1e-300 a second) overflows."""
    if per_second and (after + count - 1) / per_second > MAX_SCHEDULE_AHEAD.total_seconds():
        raise InputError(f"at this rate the last of the {count} tasks would run more than a year ahead", "per_second")
    return [first + timedelta(seconds=i / per_second) if per_second else first for i in range(after, after + count)]


def check_drip(times: list[datetime], now: datetime) -> None:
    """A drip rate (per_second) so slow that the last of the tasks would run more than a year ahead, where no
    task may be scheduled, is refused before anything is changed."""
    last = max(times, default=now)
    if last - now > MAX_SCHEDULE_AHEAD:
        when = f"{last:%Y-%m-%d}, more than a year ahead"
        raise InputError(f"at this rate the last of the {len(times)} tasks would run at {when}", "per_second")


def new_entry(task: Task, amendment: Amendment, now: datetime) -> datetime:
    """Where the task's index entry goes: the new time; after a change of priority alone, its time or now,
    whichever is later, and always at least a millisecond after the old entry (a consumer that sent the
    task remembers it by (id, time), and would not look at an entry it thinks it has sent)."""
    old = task.next_at or task.scheduled_at
    moves = amendment.priority is not None and amendment.priority != task.priority
    if amendment.run_at is not None:
        return amendment.run_at + ONE_MS if moves and amendment.run_at == old else amendment.run_at
    return max(old + ONE_MS, now) if moves else old


def amend(store: TaskStore, task: Task, amendment: Amendment, now: datetime, at: datetime | None = None) -> Outcome:
    """Apply the amendment to the task as read (its attempt fences the write); the entry goes to `at` if
    given (a bulk run's spread-out time), else to new_entry. Not applied: the task moved on meanwhile."""
    transition = lifecycle.amend_of(task.status)
    if transition is None:
        return Outcome(applied=False, task=task)
    priority = amendment.priority if amendment.priority != task.priority else None
    change = Change(
        now=now,
        attempt=task.attempt,
        next_at=at or new_entry(task, amendment, now),
        priority=priority,
        payload=None if amendment.payload is None else encode_payload(amendment.payload),
        scheduled_at=None if amendment.run_at is None else at or amendment.run_at,
    )
    return store.transition(TaskRef.of(task), transition, change)
