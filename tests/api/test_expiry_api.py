"""Expiry on the live stack: a task whose collection is paused past its expire_at ends as expired
when the gate lifts, instead of running late; one that starts in time runs."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

from atf_core.schema import TaskStatus
from tests.api.live import LiveStack


def test_a_task_held_past_its_expire_at_ends_expired_not_late(live: LiveStack) -> None:
    client, collection = live.client, f"held-{uuid.uuid4().hex[:8]}"
    client.pause("tick", collection, reason="hold until the deadline passes")
    # A gate takes effect within a consumer poll and a controller's gate refresh (2 s);
    # a task scheduled in that window may still be enqueued before the gate is seen.
    time.sleep(2.5)
    expire_at = datetime.now(UTC) + timedelta(seconds=1.5)
    late = client.schedule("tick", {"late": True}, collection=collection, expire_at=expire_at).id
    punctual = client.schedule("tick", collection=f"{collection}-free", expire_at=expire_at + timedelta(minutes=5)).id
    time.sleep(max(0.0, (expire_at - datetime.now(UTC)).total_seconds()) + 0.5)
    assert client.get(late).status is TaskStatus.NEW, "held by the gate, not run"
    client.resume("tick", collection)
    expired = live.wait_for(lambda: client.get(late), lambda t: t.status is TaskStatus.EXPIRED)
    assert expired.attempt == 0 and expired.claimed_at is None, "it never ran"
    assert live.wait_for(lambda: client.get(punctual), lambda t: t.status.terminal).status is TaskStatus.SUCCESS
