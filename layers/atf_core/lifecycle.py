"""ATF's state machine: every legal transition, and what it does to the index.

A transition is applied by the store as one conditional write that checks
the current status (and, where a writer acts for one execution or message,
the attempt), so a stale writer can never overwrite newer state.

How the scheduling index follows ATF's table, at fewer write units:
- new: next_timestamp = the scheduled time.
- enqueued (written only with record_enqueued) / claimed: the index entry is left where it was (the consumer
  knows the deadline, enqueued + enqueue_timeout or claimed + claim_timeout,
  from the item itself). Moving it would cost two index writes per step.
- processing: a heartbeat moves next_timestamp to heartbeat + timeout only when
  the entry would otherwise come due within half a timeout; the other beats
  write just the heartbeat stamp, which is what the consumer's lease check reads.
- retriable_failure: next_timestamp = now + backoff (atf_core.backoff; or the callback's retry-after).
- terminal: the entry leaves the index.
- dead_letter: the entry moves to the lambda's dead-letter partition, keyed by
  when it died, so dead letters can be listed by time window.
- waiting (a chain link whose parents have not succeeded): no entry until released.
- amended (an operator changed the run time, priority or payload of a task not yet claimed): the entry moves
  to the new time and the new priority's partition, so a message sent for the old entry is stale (below).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from atf_core.definitions import Attr
from atf_core.schema import TaskStatus

S = TaskStatus


class IndexEffect(StrEnum):
    KEEP = "keep"
    MOVE = "move"
    REMOVE = "remove"


class Assoc(StrEnum):
    """ATF's association status: the first part of an index partition key, so that one query reads one kind."""

    NEW = "n"  # not started yet: the consumer's due tasks
    STARTED = "s"  # running, or waiting to retry
    DEAD_LETTER = "d"  # failed for good, keyed by when it died


class Expiry(StrEnum):
    """What a transition asks of a task's expire_at."""

    ANY = "any"
    NOT_PASSED = "not_passed"  # a claim or an enqueue skips a task whose expire_at has passed
    PASSED = "passed"  # when the change names a moment (expired_by), only a task whose expire_at has passed by then


@dataclass(frozen=True)
class Transition:
    name: str
    sources: frozenset[TaskStatus]
    target: TaskStatus
    index: IndexEffect = IndexEffect.KEEP
    moves_to: Assoc | None = None  # the partition a MOVE puts the index entry in
    stamps: str | None = None  # the attribute set to the moment of the change
    stamps_once: str | None = None  # ...and one set to it only the first time (kept by every later change)
    expiry: Expiry = Expiry.ANY
    fenced: bool = True  # the writer must name the attempt it acts for
    bumps_attempt: bool = False

    def __post_init__(self) -> None:
        if (self.index is IndexEffect.MOVE) != (self.moves_to is not None):
            raise ValueError(f"{self.name}: a MOVE, and only a MOVE, names the partition it moves to")

    def allows(self, status: TaskStatus) -> bool:
        return status in self.sources


def _t(name: str, sources: set[TaskStatus], target: TaskStatus, **kw: object) -> Transition:
    return Transition(name, frozenset(sources), target, **kw)  # type: ignore[arg-type]


IN_FLIGHT = {S.ENQUEUED, S.CLAIMED, S.PROCESSING}
RUNNING = {S.CLAIMED, S.PROCESSING}
NOT_STARTED = {S.NEW, S.ENQUEUED, S.RETRIABLE_FAILURE}
MOVE, REMOVE = IndexEffect.MOVE, IndexEffect.REMOVE

# The consumer found the task due (or due again after a retriable failure).
ENQUEUE = _t(
    "enqueue", {S.NEW, S.RETRIABLE_FAILURE}, S.ENQUEUED, stamps=Attr.ENQUEUED, expiry=Expiry.NOT_PASSED, fenced=False
)
# The consumer found an in-flight task past its deadline (lost message, dead
# controller, dead executor) and pushes it again.
REQUEUE = _t("requeue", IN_FLIGHT, S.ENQUEUED, stamps=Attr.ENQUEUED)
# ...and when that task has used all its attempts, it ends (or waits as a dead letter).
EXHAUST = _t("exhaust", RUNNING, S.FATAL_FAILURE, index=REMOVE)
EXHAUST_TO_DEAD_LETTER = _t("exhaust_to_dead_letter", RUNNING, S.DEAD_LETTER, index=MOVE, moves_to=Assoc.DEAD_LETTER)
# A controller took the task off its queue for an executor: a new execution. By default the
# consumer sends without writing, so the claim starts from new or retriable_failure; the
# attempt in the message and the entry's timestamp fence out stale and early messages.
CLAIM = _t(
    "claim",
    NOT_STARTED,
    S.CLAIMED,
    stamps=Attr.CLAIMED,
    stamps_once=Attr.FIRST_CLAIMED,
    expiry=Expiry.NOT_PASSED,
    bumps_attempt=True,
)
# A controller found the task gated after it was enqueued (or a send failed): back to
# the consumer. The entry moves to "now" so the consumer sees it afresh at once.
RELEASE = _t("release", {S.ENQUEUED}, S.NEW, index=MOVE, moves_to=Assoc.NEW)
HEARTBEAT = _t("heartbeat", RUNNING, S.PROCESSING, index=MOVE, moves_to=Assoc.STARTED, stamps=Attr.HEARTBEAT)
# ...and between those moves, a beat that only stamps the lease (one write unit instead of three).
HEARTBEAT_STAMP = _t("heartbeat_stamp", RUNNING, S.PROCESSING, stamps=Attr.HEARTBEAT)
SUCCEED = _t("succeed", RUNNING, S.SUCCESS, index=REMOVE)
FAIL_RETRIABLE = _t("fail_retriable", RUNNING, S.RETRIABLE_FAILURE, index=MOVE, moves_to=Assoc.STARTED)
FAIL_FATAL = _t("fail_fatal", RUNNING, S.FATAL_FAILURE, index=REMOVE)
FAIL_TO_DEAD_LETTER = _t("fail_to_dead_letter", RUNNING, S.DEAD_LETTER, index=MOVE, moves_to=Assoc.DEAD_LETTER)
# An operator sends dead letters back with a fresh attempt budget, or gives up on them.
REDRIVE = _t("redrive", {S.DEAD_LETTER}, S.NEW, index=MOVE, moves_to=Assoc.NEW, fenced=False)
DISCARD = _t("discard", {S.DEAD_LETTER}, S.FATAL_FAILURE, index=REMOVE, fenced=False)
# A task that has not started by its expire_at ends instead of running late.
EXPIRE = _t("expire", NOT_STARTED, S.EXPIRED, index=REMOVE, expiry=Expiry.PASSED, fenced=False)
# A chain link whose parents all succeeded becomes an ordinary new task.
RELEASE_LINK = _t("release_link", {S.WAITING}, S.NEW, index=MOVE, moves_to=Assoc.NEW, fenced=False)
# An operator changes a task that no executor has claimed: its run time, priority or payload. Fenced by the
# attempt it read, so a claim in between refuses the change. The entry moves (to the new time, or the new
# priority's partition, at least a millisecond later so consumers see it as news), and a message the consumer
# already sent for the old entry is refused by the claim's entry fence (Change.entry_ms and the priority).
AMEND = _t("amend", {S.NEW, S.ENQUEUED}, S.NEW, index=MOVE, moves_to=Assoc.NEW)
AMEND_RETRY = _t("amend_retry", {S.RETRIABLE_FAILURE}, S.RETRIABLE_FAILURE, index=MOVE, moves_to=Assoc.STARTED)
CANCEL = _t("cancel", NOT_STARTED | {S.WAITING}, S.CANCELLED, index=REMOVE, fenced=False)
DROP = _t("drop", NOT_STARTED, S.DROPPED, index=REMOVE, fenced=False)

TRANSITIONS: tuple[Transition, ...] = (
    ENQUEUE,
    REQUEUE,
    EXHAUST,
    EXHAUST_TO_DEAD_LETTER,
    FAIL_TO_DEAD_LETTER,
    REDRIVE,
    DISCARD,
    EXPIRE,
    RELEASE_LINK,
    CLAIM,
    RELEASE,
    HEARTBEAT,
    HEARTBEAT_STAMP,
    SUCCEED,
    FAIL_RETRIABLE,
    FAIL_FATAL,
    CANCEL,
    DROP,
    AMEND,
    AMEND_RETRY,
)


def amend_of(status: TaskStatus) -> Transition | None:
    """The transition that changes a task not yet claimed, by its status (None: it cannot be changed)."""
    return {S.NEW: AMEND, S.ENQUEUED: AMEND, S.RETRIABLE_FAILURE: AMEND_RETRY}.get(status)


def heartbeat_moves_entry(entry_due: datetime | None, now: datetime, timeout_s: float) -> bool:
    """Whether this beat moves the index entry (HEARTBEAT) or only stamps the lease (HEARTBEAT_STAMP).

    The entry only tells the consumer when to look; the lease is the item's heartbeat stamp. Moving
    it once it is less than half a timeout away keeps it ahead of a live executor (so the consumer
    does not read the task at all), at one move every few beats: with the default 5 s beats and a
    30 s timeout, one beat in four. `entry_due` is where this executor last put it (None: not yet).
    """
    return entry_due is None or entry_due - now < timedelta(seconds=timeout_s / 2)
