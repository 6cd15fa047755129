"""When an in-flight task counts as stuck, by ATF's table."""

from __future__ import annotations

from datetime import datetime, timedelta

from atf_core.config import Timeouts
from atf_core.definitions import Attr
from atf_core.schema import Task, TaskStatus, to_ms


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
