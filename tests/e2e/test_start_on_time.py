"""Tasks start when they should, every time, on moto's server with worker hosts as processes: across a
worker host's replacement, under a gate on another collection, after a resume, and in priority order
under a backlog. Each race is repeated: a stall seen once in ten runs is a defect."""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from subprocess import Popen
from typing import Any

from atf_core.errors import Conflict
from atf_core.gating import Gating
from atf_core.schema import GateAction, ScheduleRequest, Task, TaskStatus, utcnow
from atf_core.tasks import Scheduling
from tests.e2e.conftest import RunningStack

Host = Callable[..., "Popen[bytes]"]
# A task that starts within this of when it could is on time. What the defects cost was the enqueue
# timeout (15 s here): a message taken by a host that went away, or discarded under a lifted pause.
ON_TIME_S = 5.0
QUICK = {"seconds": 0.01}


def schedule(stack: RunningStack, count: int, **body: Any) -> list[Task]:
    scheduling = Scheduling(stack.store, stack.config)
    request = ScheduleRequest.model_validate({"lambda": "work", "payload": QUICK, **body})
    return [scheduling.schedule(request).task for _ in range(count)]


def lateness(tasks: list[Task], since: datetime | None = None) -> list[float]:
    """Seconds from when each could start (its scheduled time, or `since` if later) to its claim."""
    return [
        round((t.claimed_at - max(t.scheduled_at, since or t.scheduled_at)).total_seconds(), 1)
        for t in tasks
        if t.claimed_at is not None
    ]


def run(stack: RunningStack, tasks: list[Task]) -> list[Task]:
    return stack.wait_for([t.id for t in tasks], lambda t: t.status.terminal, timeout_s=40)


def test_a_host_replaced_as_a_deploy_does_costs_no_task_its_start_time(
    stack: RunningStack, worker_host: Host, tmp_path: Path
) -> None:
    # Given hosts with the default long poll, replaced one after another as an ECS deploy does (the new
    # host starts, the old one gets SIGTERM), and a paused collection beside the tasks that must run
    gating = Gating(stack.store, stack.config)
    stopped = [worker_host(threads=2, receive_wait=10, log=tmp_path / "host-0.log")]
    for round_ in range(8):
        new = worker_host(threads=2, receive_wait=10, log=tmp_path / f"host-{round_ + 1}.log")
        stopped[-1].send_signal(signal.SIGTERM)  # its long polls are still open as the tasks come
        gating.set("work", f"held-{round_}", GateAction.PAUSE, None)
        held = schedule(stack, 3, collection=f"held-{round_}")
        free = schedule(stack, 5, collection=f"free-{round_}")
        # Then the tasks of the other collection start on time: nothing of theirs went to the old host
        free_lateness = lateness(run(stack, free))
        assert max(free_lateness) < ON_TIME_S, f"round {round_}: late by {free_lateness}"
        # And the paused ones start promptly once resumed
        resumed_at = utcnow()
        gating.lift("work", f"held-{round_}")
        held_lateness = lateness(run(stack, held), since=resumed_at)
        assert max(held_lateness) < ON_TIME_S, f"round {round_}: late after the resume by {held_lateness}"
        stopped.append(new)
    # And every replaced host stopped cleanly (it waits for its polls in flight: up to the long poll's 10 s)
    assert [host.wait(timeout=30) for host in stopped[:-1]] == [0] * 8


def test_a_resume_releases_the_held_tasks_within_a_poll_and_a_gate_refresh_every_time(
    stack: RunningStack, worker_host: Host, tmp_path: Path
) -> None:
    # Given a host whose controller reads the gates every 2 s (it caches the pause meanwhile)
    worker_host(threads=2, receive_wait=10, log=tmp_path / "host.log")
    gating = Gating(stack.store, stack.config)
    for cycle in range(6):
        gating.set("work", "cycled", GateAction.PAUSE, None)
        time.sleep(1.0)  # a pause holds back what the consumer finds due after its next poll has read it
        held = schedule(stack, 3, collection="cycled")
        time.sleep(1.0 + cycle * 0.3)  # held past a gate refresh; the resume lands at a different point of it
        assert [stack.store.get(t.id).status for t in held] == [TaskStatus.NEW] * 3  # type: ignore[union-attr]
        resumed_at = utcnow()
        gating.lift("work", "cycled")
        # Then they start within a consumer poll and a gate refresh, never after the enqueue timeout
        late = lateness(run(stack, held), since=resumed_at)
        assert max(late) < ON_TIME_S, f"cycle {cycle}: started {late} s after the resume"


def test_under_a_backlog_every_higher_priority_task_starts_before_any_lower_one(
    stack: RunningStack, worker_host: Host, tmp_path: Path
) -> None:
    # Given one executor thread, and a paused lambda with 30 low then 30 high tasks waiting
    worker_host(executors=1, threads=1, log=tmp_path / "host.log")
    gating = Gating(stack.store, stack.config)
    for round_ in range(10):
        gating.set("work", None, GateAction.PAUSE, None)
        time.sleep(1.0)  # the consumer's next poll has read the pause
        low, high = schedule(stack, 30, priority="low"), schedule(stack, 30, priority="high")
        # When the lambda resumes
        gating.lift("work", None)
        # Then the first 30 to start are the high ones
        done_high = finished(stack, high)
        started = [t for t in stack.store.get_many([t.id for t in low]) if t.claimed_at is not None] + done_high
        first = [t.priority for t in sorted(started, key=lambda t: t.claimed_at or t.created_at)[:30]]
        assert first.count("high") == 30, f"round {round_}: {first.count('low')} low ones among the first 30"
        for task in low:  # what has not started need not run: the next round starts sooner
            with contextlib.suppress(Conflict):
                Scheduling(stack.store, stack.config).cancel(task.id)
        finished(stack, low)


def finished(stack: RunningStack, tasks: list[Task], timeout_s: float = 60) -> list[Task]:
    """Once every task has ended (read in batches: many single reads would load moto's server)."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = stack.store.get_many([t.id for t in tasks])
        if len(found) == len(tasks) and all(t.status.terminal for t in found):
            return found
        assert time.monotonic() < deadline, f"not finished: {[t.status.value for t in found]}"
        time.sleep(0.2)
