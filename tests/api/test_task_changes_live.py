"""Changed tasks on the live stack (consumer and worker host running): a rescheduled task runs at its new
time, a reprioritised one from the other priority's queue, and a change racing the claim either wins
(the task runs once, at its new time) or is refused with 409 (the task runs once, as it was)."""

from __future__ import annotations

import random
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from atf_core.errors import Conflict
from atf_core.schema import Task, TaskStatus
from tests.api.live import LiveStack

ROUNDS = 8
# The consumer sends a task up to its lookahead before it is due (LIVE_CONFIG), so a controller may claim it that early.
EARLY = timedelta(seconds=0.5)


def _done(live: LiveStack, task_id: str) -> Task:
    return live.wait_for(lambda: live.client.get(task_id), lambda t: t.status is TaskStatus.SUCCESS, timeout_s=30)


def test_a_rescheduled_task_runs_at_its_new_time_not_its_old(live: LiveStack) -> None:
    client, now = live.client, datetime.now(UTC)
    task = client.schedule("flaky", collection=f"re-{uuid.uuid4().hex[:8]}", run_at=now + timedelta(seconds=1))
    new_time = now + timedelta(seconds=4)
    client.change(task.id, run_at=new_time)
    ran = _done(live, task.id)
    assert ran.claimed_at is not None and ran.claimed_at >= new_time - EARLY, "not at its old time"
    assert ran.attempt == 1


def test_a_reprioritised_task_is_taken_from_the_other_prioritys_queue(live: LiveStack) -> None:
    """The claim only accepts a message from the queue of the task's priority (it checks it), so a claimed
    task whose priority is high was taken from the high queue."""
    client, collection = live.client, f"rp-{uuid.uuid4().hex[:8]}"
    task = client.schedule("flaky", collection=collection, delay_seconds=2)
    assert client.get(task.id).priority == "normal"
    moved = client.bulk_reprioritise("high", lambda_name="flaky", collection=collection)
    assert moved.changed == 1
    ran = _done(live, task.id)
    assert (ran.priority, ran.attempt) == ("high", 1)


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_a_change_racing_the_claim_is_refused_or_wins_and_the_task_runs_once(live: LiveStack, round_: int) -> None:
    client = live.client
    task = client.schedule("flaky", collection=f"race-{round_}-{uuid.uuid4().hex[:6]}")
    time.sleep(random.uniform(0, 0.6))  # before, around or after the consumer sends it and a controller claims it
    try:
        changed = client.change(task.id, delay_seconds=1.5, payload={"returns": "changed"})
    except Conflict as refused:
        assert refused.status == 409
        ran = _done(live, task.id)
        assert (ran.attempt, ran.result, ran.payload) == (1, None, {})
        return
    ran = _done(live, task.id)
    assert (ran.attempt, ran.result) == (1, "changed"), "runs once, with the new payload"
    assert changed.next_at is not None and ran.claimed_at is not None and ran.claimed_at >= changed.next_at - EARLY
