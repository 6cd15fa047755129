"""Time limits on a real worker host: a callback over its limit is stopped within the limit + 1 s, fails with
a TaskTimeout in its history, is retried, and never overlaps its retry; other tasks carry on."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from atf_core.schema import Task, TaskStatus
from tests.conftest import TEST_CONFIG
from tests.e2e.conftest import RunningStack, running_stack
from tests.e2e.lambdas import alive
from tests.e2e.test_worker_host import Host, finished, schedule

LIMITED = "tests.e2e.lambdas:limited_lambdas"
ASYNC_LIMITED = "tests.e2e.lambdas:async_limited_lambdas"
LAMBDA_LIMIT_S = 2.0  # sleepy's time limit in this module's stack; tasks may set their own
ROUNDS = 3  # timing matters: each case runs this often


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    config = copy.deepcopy(TEST_CONFIG)
    config["lambdas"]["sleepy"]["timeout_seconds"] = LAMBDA_LIMIT_S
    with running_stack(config, tmp_path_factory) as running:
        yield running


def attempt_record(folder: Path, task: Task, attempt: int, timeout_s: float = 30) -> dict[str, Any]:
    """What the callback's attempt wrote as it started (tests.e2e.lambdas._record)."""
    path = folder / f"{task.id}.{attempt}.json"
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"attempt {attempt} of {task.id} never started"
        time.sleep(0.02)
    time.sleep(0.02)  # the file is written in one call; let it land
    return dict(json.loads(path.read_text()))


def ended_at(pid: int, timeout_s: float = 10) -> float:
    """When process `pid` stopped running (wall clock, to 20 ms)."""
    deadline = time.monotonic() + timeout_s
    while alive(pid):
        assert time.monotonic() < deadline, f"process {pid} still runs"
        time.sleep(0.02)
    return time.time()


def assert_timed_out_then_retried(stack: RunningStack, task: Task, folder: Path, limit_s: float) -> dict[str, Any]:
    """The first attempt failed with a TaskTimeout within the limit + 1 s; the second ran after it, alone,
    and succeeded. The first attempt's record."""
    first = attempt_record(folder, task, 1)
    (done,) = stack.wait_for([task.id], finished, timeout_s=40)
    assert (done.status, done.attempt) == (TaskStatus.SUCCESS, 2), done.errors
    assert [(e.type, e.attempt) for e in done.errors] == [("TaskTimeout", 1)]
    stopped = done.errors[0].at.timestamp()
    # the limit counts from just before the callback is called (its record comes a few ms later)
    assert limit_s - 0.1 <= stopped - first["started"] <= limit_s + 1.0, stopped - first["started"]
    second = attempt_record(folder, task, 2)
    assert second["started"] >= stopped and second["overlaps"] == []  # the stopped attempt's process was gone
    return first


def test_a_sync_callback_over_its_limit_is_stopped_by_its_process_and_retried_alone(
    stack: RunningStack, worker_host: Host, tmp_path: Path
) -> None:
    # Given a host running sleepy (its first attempts never return) and work, an executor each
    worker_host(executors=1, threads=1, lambdas=LIMITED)
    for round_ in range(ROUNDS):
        others = [schedule(stack, payload={"seconds": 0.3}) for _ in range(4)]
        # When a task with its own limit, then one with its lambda's, overruns
        for limit_s, own in ((1.5, {"timeout_seconds": 1.5}), (LAMBDA_LIMIT_S, {})):
            task = schedule(stack, **{"lambda": "sleepy"}, payload={"dir": str(tmp_path)}, **own)
            first = attempt_record(tmp_path, task, 1)
            # Then its process ends within the limit + 1 s, and the attempt is retried after it, alone
            gone = ended_at(first["pid"])
            assert gone - first["started"] <= limit_s + 1.0, (round_, gone - first["started"])
            assert_timed_out_then_retried(stack, task, tmp_path, limit_s)
        # And the host's other tasks ran, once each
        done = stack.wait_for([t.id for t in others], finished, timeout_s=30)
        assert [(t.status, t.attempt, t.errors) for t in done] == [(TaskStatus.SUCCESS, 1, [])] * len(others)


def test_an_async_callback_is_cancelled_at_its_limit_and_its_executor_carries_on(
    stack: RunningStack, worker_host: Host, tmp_path: Path
) -> None:
    worker_host(executors=1, threads=1, lambdas=ASYNC_LIMITED)
    for _ in range(ROUNDS):
        task = schedule(stack, **{"lambda": "sleepy"}, payload={"dir": str(tmp_path)}, timeout_seconds=1.0)
        first = assert_timed_out_then_retried(stack, task, tmp_path, 1.0)
        # the coroutine was cancelled (it ended within the limit + 1 s, before its retry began); its process
        # lives on, and ran the retry
        ended = float((tmp_path / f"{task.id}.1.ended").read_text())
        second = attempt_record(tmp_path, task, 2)
        assert ended - first["started"] <= 1.0 + 1.0 and ended <= second["started"]
        assert alive(first["pid"]) and second["pid"] == first["pid"]


def test_an_async_callback_deaf_to_cancelling_is_stopped_with_its_process(
    stack: RunningStack, worker_host: Host, tmp_path: Path
) -> None:
    worker_host(executors=1, threads=1, lambdas=ASYNC_LIMITED)
    for _ in range(ROUNDS):
        payload = {"dir": str(tmp_path), "block": True}
        task = schedule(stack, **{"lambda": "sleepy"}, payload=payload, timeout_seconds=1.0)
        first = attempt_record(tmp_path, task, 1)
        assert ended_at(first["pid"]) - first["started"] <= 1.0 + 1.0
        assert_timed_out_then_retried(stack, task, tmp_path, 1.0)


def test_the_tasks_sharing_the_stopped_process_are_recorded_as_lost_and_run_again(
    stack: RunningStack, worker_host: Host, tmp_path: Path
) -> None:
    # Given an executor of two threads, one running a task that will finish in 4 s, within its limit
    worker_host(executors=1, threads=2, lambdas=LIMITED)
    sibling = schedule(stack, **{"lambda": "sleepy"}, payload={"dir": str(tmp_path), "seconds": 4})
    sibling_first = attempt_record(tmp_path, sibling, 1)
    # When the other thread's task overruns its limit
    task = schedule(stack, **{"lambda": "sleepy"}, payload={"dir": str(tmp_path)}, timeout_seconds=1.0)
    assert_timed_out_then_retried(stack, task, tmp_path, 1.0)
    # Then the sibling, stopped with the process, is not lost: its host records the loss, and it runs again after
    # its first attempt's process
    (done,) = stack.wait_for([sibling.id], finished, timeout_s=60)
    assert (done.status, done.attempt) == (TaskStatus.SUCCESS, 2)
    assert [(e.type, "as its host saw its connection close" in e.message) for e in done.errors] == [
        ("LostExecution", True)
    ]
    second = attempt_record(tmp_path, sibling, 2)
    assert second["overlaps"] == [] and second["pid"] != sibling_first["pid"]
