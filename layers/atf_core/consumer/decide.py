"""What the consumer does with one due entry: a pure decision from what it knows, no reads or writes.

The consumer reads the index (and, by default, the tasks), decides each entry
here, then carries the action out: one conditional write, one message, or a
note of when to look again. Deciding apart from acting lets every branch of
ATF's recovery rules be tested without an AWS, and keeps the effects in one
place (consumer.Consumer).

The actions, a closed set:
- Send: the task waits to be sent; send it without writing (the default mode).
- Enqueue: write it as enqueued, then send it (record_enqueued).
- Drop: a drop gate applies at the task's run time; it ends as dropped.
- Expire: its expire_at has passed before it started; it ends as expired.
- Requeue: it is stuck in flight; write it as enqueued again (a running attempt
  found lost goes into its errors) and send it.
- Exhaust: it is stuck on its last attempt; it ends, or waits as a dead letter.
- Wait: nothing to do before `until_ms`; the consumer skips the entry till then.

A write the store refuses means the task moved on meanwhile: the consumer
decides again from the task as the refused write found it (`recover`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeGuard

from atf_core import lifecycle
from atf_core.config import StackConfig, Timeouts
from atf_core.consumer.deadlines import deadline_of, lost_attempt, observed_stamp
from atf_core.consumer.tracker import EntryKey
from atf_core.lifecycle import Transition
from atf_core.schema import Gate, GateAction, Task, TaskError, TaskStatus, to_ms
from atf_core.store.base import DueEntry, TaskRef

WAITING = frozenset({TaskStatus.NEW, TaskStatus.RETRIABLE_FAILURE})  # to be sent, not in flight
RUNNING = frozenset(lifecycle.RUNNING)
INDEX_LAG_MS = 5_000  # the index lags the table by up to a second: a finished task's entry may linger


@dataclass(frozen=True)
class Look:
    """What the consumer knows of one due entry as it decides."""

    entry: DueEntry
    task: Task | None  # as read, or as a refused write found it; None: not read (record_enqueued) or not there
    now: datetime
    gate: Gate | None = None  # the gate that applies to the entry's lambda and collection at its run time
    sent_ms: int | None = None  # when this consumer last sent it without writing
    watched_since_ms: int | None = None  # since when this consumer has seen the task's claim/heartbeat stamp
    lookahead_s: float | None = None  # how far ahead the poll reads, if not the configured lookahead

    @property
    def now_ms(self) -> int:
        return to_ms(self.now)

    @property
    def key(self) -> EntryKey:
        return (self.entry.id, self.entry.next_ms)

    @property
    def ref(self) -> TaskRef:
        return TaskRef(self.entry.id, self.entry.lambda_name, self.entry.priority, self.entry.flow_key)


@dataclass(frozen=True)
class Send:
    attempt: int


@dataclass(frozen=True)
class Enqueue:
    due_by: datetime  # the write applies only if the entry is due by then


@dataclass(frozen=True)
class Drop:
    reason: str


@dataclass(frozen=True)
class Expire:
    pass


@dataclass(frozen=True)
class Requeue:
    attempt: int
    observed: dict[str, int]  # the stamp that must still be unchanged
    error: TaskError | None  # the lost attempt, if it was running


@dataclass(frozen=True)
class Exhaust:
    transition: Transition  # EXHAUST, or EXHAUST_TO_DEAD_LETTER where the lambda keeps dead letters
    attempt: int
    observed: dict[str, int]
    error: TaskError
    reason: str


@dataclass(frozen=True)
class Wait:
    until_ms: int


Action = Send | Enqueue | Drop | Expire | Requeue | Exhaust | Wait
# How an enqueue mode (modes.py) hands over an entry that is neither expired nor dropped.
Handover = Callable[["Look", StackConfig], Action]


def decide(look: Look, config: StackConfig, handover: Handover) -> Action:
    """The first look at a due entry: its expiry and gate first, then its enqueue mode's way."""
    expire_ms = look.entry.expire_ms
    if expire_ms is not None and expire_ms <= look.now_ms:
        return Expire()
    gate = look.gate  # the one in force at the task's run time (one lifting by its until before is not)
    if gate is None or gate.action is not GateAction.DROP:
        return handover(look, config)
    # A drop ends the task for good, so it is the gate in force at the task's run time that drops it, not
    # one in force when the poll reads ahead (lookahead): a gate lifted by hand meanwhile must leave it to run.
    if look.entry.next_ms > look.now_ms:
        return Wait(look.entry.next_ms)
    return Drop(f"dropped by gate {gate.scope}" + (f": {gate.reason}" if gate.reason else ""))


def record_and_send(look: Look, config: StackConfig) -> Action:
    """record_enqueued: write the task as enqueued (if it is still due by the lookahead), then send it."""
    lookahead_s = config.lookahead if look.lookahead_s is None else look.lookahead_s
    return Enqueue(due_by=look.now + timedelta(seconds=lookahead_s))


def send_unrecorded(look: Look, config: StackConfig) -> Action:
    """The default: send a waiting task without writing, unless this consumer sent it less than an
    enqueue timeout ago (the controller's claim is the task's first write)."""
    task = look.task
    if task is None:  # not yet visible to an eventually consistent read: look again next poll
        return Wait(look.now_ms + int(config.poll_interval * 1000))
    if task.status not in WAITING:
        return recover(look, config)
    resend_ms = (look.sent_ms or 0) + int(config.timeouts.enqueue * 1000)
    if resend_ms > look.now_ms:  # the message may still be queued behind others
        return Wait(resend_ms)
    return Send(task.attempt)


def recover(look: Look, config: StackConfig) -> Action:
    """An entry whose task is not waiting to be sent: in flight, finished, or stuck."""
    task = look.task
    if task is None or task.status.terminal or task.status in WAITING:
        return Wait(look.now_ms + INDEX_LAG_MS)
    wake_ms = stuck_after_ms(look, task, config.timeouts)
    if wake_ms > look.now_ms:
        return Wait(wake_ms)
    error = lost_attempt(task, config.timeouts, look.now) if task.status in RUNNING else None
    if error is None or task.attempt < task.max_attempts:
        return Requeue(task.attempt, observed_stamp(task), error)
    reason = f"attempt {task.attempt} of {task.max_attempts} was lost (executor or controller died)"
    dead_letter = config.lambdas[look.entry.lambda_name].dead_letter
    transition = lifecycle.EXHAUST_TO_DEAD_LETTER if dead_letter else lifecycle.EXHAUST
    return Exhaust(transition, task.attempt, observed_stamp(task), error, reason)


def watches_stamp(task: Task | None) -> TypeGuard[Task]:
    """Whether the stuck check of this task needs to know since when its stamp has stayed unchanged."""
    return task is not None and not task.status.terminal and task.status not in WAITING | {TaskStatus.ENQUEUED}


def stuck_after_ms(look: Look, task: Task, timeouts: Timeouts) -> int:
    """When an in-flight task counts as stuck (deadlines.py says why it is both conditions)."""
    deadline = deadline_of(task, timeouts)
    deadline_ms = to_ms(deadline) if deadline else look.now_ms
    if task.status is TaskStatus.ENQUEUED:
        return deadline_ms  # not running: an early re-enqueue only duplicates a message
    watched_ms = look.now_ms if look.watched_since_ms is None else look.watched_since_ms
    return max(deadline_ms, watched_ms + int(timeouts.lease_floor * 1000))
