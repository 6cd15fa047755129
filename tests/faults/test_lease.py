"""An executor must stop running a task before the consumer may hand it to someone else.

The consumer re-enqueues a running task once it has watched the task's last
heartbeat (or claim) stamp stay unchanged for the lease floor on its own
clock, and that stamp landed no earlier than the call that wrote it was sent
(see atf_core.consumer.deadlines and Timeouts.lease_floor). So an executor is safe only if it is gone
within the lease floor of sending its last successful heartbeat, or of the
claim, whatever its heartbeat calls are doing meanwhile.
"""

from __future__ import annotations

import contextlib
import threading
import time
from datetime import timedelta
from typing import Any, cast

from botocore.exceptions import ReadTimeoutError

from atf_core.config import StackConfig, Timeouts
from atf_core.schema import Task, TaskStatus, utcnow
from atf_core.store.base import Outcome, TaskStore
from atf_sdk.worker.executor import TaskRunner
from atf_sdk.worker.heartbeat import Heartbeats
from tests.builders import a_task

# The shortest timeouts the configuration accepts, so the test is quick.
TIMEOUTS = Timeouts(heartbeat_interval=0.2, heartbeat=7, claim=7)
FLOOR = TIMEOUTS.lease_floor


class HangingStore:
    """The first heartbeat lands; every later one hangs (a partition) and fails like a timeout."""

    def __init__(self, hang_s: float) -> None:
        self.hang_s = hang_s
        self.calls = 0
        self.last_ok_sent = 0.0

    def transition(self, *_: Any) -> Outcome:
        self.calls += 1
        if self.calls == 1:
            self.last_ok_sent = time.monotonic()
            return Outcome(applied=True, task=None)
        time.sleep(self.hang_s)
        raise ReadTimeoutError(endpoint_url="http://127.0.0.1:1")


class Terminated(BaseException):
    """What os._exit does to the thread that calls it: nothing after it runs."""


def a_claimed_task(claim_age_s: float = 0.0) -> Task:
    now = utcnow()
    claimed_at = now - timedelta(seconds=claim_age_s)
    return a_task(
        now, lambda_="steady", collection="default", status=TaskStatus.CLAIMED, attempt=1, claimed_at=claimed_at
    )


def test_an_executor_whose_heartbeat_calls_hang_is_gone_within_the_lease() -> None:
    # Each hung call stays inside the retry budget the lease floor allows for one call.
    store = HangingStore(hang_s=TIMEOUTS.call_budget - 1)
    died_at: list[float] = []
    died = threading.Event()

    def terminate(reason: str) -> None:
        died_at.append(time.monotonic())
        died.set()

    heartbeats = Heartbeats(cast(TaskStore, store), TIMEOUTS, terminate=terminate)
    heartbeats.track(a_claimed_task())
    threading.Thread(target=heartbeats.run, daemon=True).start()
    try:
        assert died.wait(FLOOR + 3 * TIMEOUTS.call_budget), "the executor never ended itself"
    finally:
        heartbeats.stop()
    lived = died_at[0] - store.last_ok_sent
    assert lived < FLOOR, f"alive {lived:.1f}s after its last heartbeat was sent; the lease floor is {FLOOR:.1f}s"


def test_a_task_handed_over_after_its_lease_ran_out_is_not_started() -> None:
    # The executor was paused (SIGSTOP) while its controller claimed this task for it;
    # it reads the hand-over only after resuming, when the claim is older than the lease.
    ran: list[str] = []

    def terminate(reason: str) -> None:
        raise Terminated(reason)

    config = StackConfig.model_validate({"timeouts": TIMEOUTS.model_dump(), "lambdas": {"steady": {}}})
    heartbeats = Heartbeats(cast(TaskStore, HangingStore(0)), TIMEOUTS, terminate=terminate)
    store = cast(TaskStore, HangingStore(0))
    runner = TaskRunner(store, config, "steady", lambda task: ran.append(task.id), heartbeats)
    with contextlib.suppress(Terminated):
        runner.run(a_claimed_task(claim_age_s=FLOOR + 1))
    assert ran == [], "a task whose lease had run out was started"
