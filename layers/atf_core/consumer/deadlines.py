"""When an in-flight task counts as stuck, by ATF's table.

A running task is re-enqueued only when its deadline has passed AND this
consumer has itself watched the same claim or heartbeat timestamp stay
unchanged for the lease floor (Timeouts.lease_floor: three heartbeat
intervals plus one call's retry budget), measured on its own clock. The stamp was written before the
consumer first saw it, so the executor has really been silent at least that
long and has killed itself: an offset between the components' clocks can
delay a re-enqueue, never make it early enough to run one task twice.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from atf_core.config import Timeouts
from atf_core.definitions import Attr
from atf_core.schema import LOST_EXECUTION, Task, TaskError, TaskStatus, to_ms


def deadline_of(task: Task, timeouts: Timeouts) -> datetime | None:
    """enqueued + enqueue_timeout, claimed + claim_timeout, heartbeat + heartbeat_timeout."""
    if task.status is TaskStatus.ENQUEUED and task.enqueued_at:
        return task.enqueued_at + timedelta(seconds=timeouts.enqueue)
    if task.status is TaskStatus.CLAIMED and task.claimed_at:
        return task.claimed_at + timedelta(seconds=timeouts.claim)
    if task.status is TaskStatus.PROCESSING and task.heartbeat_at:
        return task.heartbeat_at + timedelta(seconds=timeouts.heartbeat)
    return None


def observed_stamp(task: Task) -> dict[str, int]:
    """The timestamp a re-enqueue must find unchanged: a heartbeat or claim that
    lands after the consumer looked makes the re-enqueue fail."""
    stamps = {
        TaskStatus.ENQUEUED: (Attr.ENQUEUED, task.enqueued_at),
        TaskStatus.CLAIMED: (Attr.CLAIMED, task.claimed_at),
        TaskStatus.PROCESSING: (Attr.HEARTBEAT, task.heartbeat_at),
    }
    attr, moment = stamps.get(task.status, (None, None))
    return {attr: to_ms(moment)} if attr and moment else {}


def lost_attempt(task: Task, timeouts: Timeouts, now: datetime) -> TaskError:
    """What a running attempt found stuck leaves in the task's error history: which executor ran it,
    since when it was silent, and how that was seen."""
    if task.status is TaskStatus.PROCESSING and task.heartbeat_at:
        since = _moment(task.heartbeat_at)
        how = f"lease expired: no heartbeat since {since} (heartbeat timeout {timeouts.heartbeat:g} s)"
    else:
        since = f" at {_moment(task.claimed_at)}" if task.claimed_at else ""
        # The first heartbeat marks the start: a callback that crashed its executor sooner leaves none either
        how = (
            f"claimed{since} and no heartbeat within the claim timeout ({timeouts.claim:g} s), so no start recorded"
            " (a callback that crashed its executor at once leaves none either)"
        )
    message = f"attempt {task.attempt} was lost, {how}; its executor died, was paused or could not reach the store"
    return TaskError(type=LOST_EXECUTION, message=message, attempt=task.attempt, at=now, host=task.claimed_by)


def _moment(when: datetime) -> str:
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
