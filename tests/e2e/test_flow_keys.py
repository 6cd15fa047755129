"""Limits per flow key on real worker hosts and the local stack (moto's server): one key's tasks never run
over its cap across two hosts, another key's run beside them, and no held-back task uses an attempt; a
debounced key's burst runs once, with its last payload, after the quiet period."""

from __future__ import annotations

import copy
import itertools
import time
from collections.abc import Iterator

import pytest

from atf_core.schema import ScheduleRequest, Task, TaskStatus, utcnow
from atf_core.tasks import Scheduling
from tests.conftest import TEST_CONFIG
from tests.e2e.conftest import RunningStack, running_stack
from tests.e2e.test_worker_host import Host, finished, schedule

ROUNDS = 2  # timing matters: the case runs this often


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    config = copy.deepcopy(TEST_CONFIG)
    config["lambdas"]["work"]["key_limits"] = {"max_running": 1}
    config["lambdas"]["sleepy"]["key_limits"] = {"debounce": {"quiet_seconds": 1, "max_delay_seconds": 3}}
    with running_stack(config, tmp_path_factory) as running:
        yield running


def overlapping(tasks: list[Task]) -> list[tuple[str, str, float]]:
    """Pairs of tasks whose runs (claim to finish) overlapped, and by how many seconds."""
    runs = sorted((t.claimed_at, t.finished_at, t.id) for t in tasks if t.claimed_at and t.finished_at)
    return [(a[2], b[2], (a[1] - b[0]).total_seconds()) for a, b in itertools.pairwise(runs) if b[0] < a[1]]


def test_one_key_runs_one_at_a_time_across_hosts_while_another_key_runs_beside_it(
    stack: RunningStack, worker_host: Host
) -> None:
    # Given two hosts, each with room for four tasks at once
    for _ in range(2):
        worker_host(executors=2, threads=2)
    for _ in range(ROUNDS):
        # When key A schedules six slow tasks and key B three, at once
        a_tasks = [schedule(stack, payload={"seconds": 0.4}, flow_key="A") for _ in range(6)]
        b_tasks = [schedule(stack, payload={"seconds": 0.4}, flow_key="B") for _ in range(3)]
        done = stack.wait_for([t.id for t in a_tasks + b_tasks], finished, timeout_s=90)
        a_done, b_done = done[: len(a_tasks)], done[len(a_tasks) :]
        # Then every task succeeded on its first attempt: waiting for its key used none
        assert {(t.status, t.attempt) for t in done} == {(TaskStatus.SUCCESS, 1)}
        # ...A's ran one at a time, and so did B's, but A's and B's side by side
        assert overlapping(a_done) == [] and overlapping(b_done) == []
        assert overlapping(a_done + b_done), "key B waited for key A"


def test_a_debounced_burst_runs_once_with_its_last_payload_after_the_quiet_period(
    stack: RunningStack, worker_host: Host
) -> None:
    # Given a worker host, and lambda "sleepy" debounced (quiet 1 s, at most 3 s)
    worker_host(executors=1, threads=2)
    scheduling = Scheduling(stack.store, stack.config)
    for round_ in range(ROUNDS):
        # When a burst of four requests on one key comes 0.2 s apart
        answers = []
        for n in range(4):
            time.sleep(0.2)
            last_request = utcnow()
            body = {"lambda": "sleepy", "flow_key": f"D{round_}", "payload": {"seconds": 0, "n": n}}
            answers.append(scheduling.schedule(ScheduleRequest.model_validate(body)))
        # Then they made one task, which ran once (its first attempt), with the last payload, once quiet
        assert len({a.task.id for a in answers}) == 1 and [a.debounced for a in answers] == [False, True, True, True]
        [task] = stack.wait_for([answers[0].task.id], finished, timeout_s=30)
        assert (task.status, task.attempt, task.payload) == (TaskStatus.SUCCESS, 1, {"seconds": 0, "n": 3})
        assert task.claimed_at is not None and (task.claimed_at - last_request).total_seconds() >= 0.95
