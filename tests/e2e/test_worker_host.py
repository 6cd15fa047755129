"""End to end on moto's server: the consumer, a worker host's controller and
executors, each in its own process."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from subprocess import Popen
from typing import Any

from atf_core.gating import Gating
from atf_core.schema import GateAction, ScheduleRequest, Task, TaskStatus
from atf_core.tasks import Scheduling
from atf_local.process_tree import children_of, executors_of
from tests.e2e.conftest import RunningStack, wait_for_line
from tests.e2e.exit_lambdas import AT_EXIT_ENV
from tests.e2e.lambdas import alive

Host = Callable[..., "Popen[bytes]"]


def schedule(stack: RunningStack, **body: Any) -> Task:
    request = ScheduleRequest.model_validate({"lambda": "work", **body})
    return Scheduling(stack.store, stack.config).schedule(request).task


def finished(task: Task) -> bool:
    return task.status.terminal


def test_due_tasks_run_highest_priority_first(stack: RunningStack, worker_host: Host) -> None:
    # Given one executor thread busy with a slow task
    worker_host(executors=1, threads=1)
    blocker = schedule(stack, payload={"seconds": 2.5})
    stack.wait_for([blocker.id], lambda t: t.status in (TaskStatus.CLAIMED, TaskStatus.PROCESSING))
    # When tasks of three priorities come due meanwhile, low ones first
    order = ["low", "normal", "high"] * 3
    tasks = [schedule(stack, priority=p, payload={"seconds": 0.01}) for p in order]
    done = stack.wait_for([t.id for t in tasks], finished, timeout_s=40)
    # Then they start in priority order
    started = sorted(done, key=lambda t: t.claimed_at or t.created_at)
    assert [t.priority for t in started] == ["high"] * 3 + ["normal"] * 3 + ["low"] * 3
    assert all(t.status is TaskStatus.SUCCESS for t in done)


def test_retries_then_success_and_fatal_failure_keep_the_error(stack: RunningStack, worker_host: Host) -> None:
    worker_host()
    flaky = schedule(stack, payload={"succeed_on": 3})
    fatal = schedule(stack, payload={"fatal": True})
    exhausted = schedule(stack, payload={"succeed_on": 99}, max_attempts=2)
    flaky, fatal, exhausted = stack.wait_for([flaky.id, fatal.id, exhausted.id], finished, timeout_s=40)
    assert (flaky.status, flaky.attempt) == (TaskStatus.SUCCESS, 3)
    assert flaky.last_error is not None and flaky.last_error.attempt == 2
    assert (fatal.status, fatal.attempt) == (TaskStatus.FATAL_FAILURE, 1)
    assert fatal.last_error is not None and fatal.last_error.type == "Fatal"
    assert (exhausted.status, exhausted.attempt) == (TaskStatus.FATAL_FAILURE, 2)
    assert exhausted.last_error is not None and "attempt 2" in exhausted.last_error.message


def test_a_retry_after_no_delay_can_be_fails_its_attempt_naming_it_and_the_thread_serves_on(
    stack: RunningStack, worker_host: Host
) -> None:
    # Given a host of one executor thread, and callbacks that ask to be retried after a string, a negative delay
    worker_host(executors=1, threads=1)
    odd = [schedule(stack, payload={"retry_after": after}) for after in ("abc", -5)]
    # When they run (the thread had died on the first, and its task came back as a lost execution)
    done = stack.wait_for([t.id for t in odd], finished, timeout_s=40)
    # Then each first attempt failed with the callback's error naming `after`, and the retry succeeded
    for task, error_type in zip(done, ("TypeError", "ValueError"), strict=True):
        assert (task.status, task.attempt) == (TaskStatus.SUCCESS, 2), task
        assert [(e.type, "Retry after" in e.message) for e in task.errors] == [(error_type, True)], task.errors


def test_a_paused_collection_waits_and_resumes(stack: RunningStack, worker_host: Host) -> None:
    worker_host()
    gating = Gating(stack.store, stack.config)
    gating.set("work", "slow", GateAction.PAUSE, None)
    try:
        waiting = [schedule(stack, collection="slow"), schedule(stack, collection="slow", delay_seconds=1)]
        running = [schedule(stack, collection="fast"), schedule(stack, collection="fast")]
        stack.wait_for([t.id for t in running], lambda t: t.status is TaskStatus.SUCCESS)
        time.sleep(2.5)  # the delayed one has come due meanwhile
        assert all(stack.store.get(t.id).status is TaskStatus.NEW for t in waiting)  # type: ignore[union-attr]
    finally:
        gating.lift("work", "slow")
    stack.wait_for([t.id for t in waiting], lambda t: t.status is TaskStatus.SUCCESS)


def test_a_killed_executors_task_is_recorded_as_lost_by_its_host_and_runs_again_without_waiting_for_its_lease(
    stack: RunningStack, worker_host: Host, tmp_path: Path
) -> None:
    # Given an executor whose other threads wait for work while one runs a task
    log = tmp_path / "host.log"
    host = worker_host(executors=1, threads=3, log=log)
    task = (
        Scheduling(stack.store, stack.config)
        .schedule(ScheduleRequest.model_validate({"lambda": "sleepy", "payload": {"seconds": 120}}))
        .task
    )
    stack.wait_for([task.id], lambda t: t.status is TaskStatus.PROCESSING)
    # When it is killed
    killed_at = time.time()
    killed = executors_of(host.pid)
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    [done] = stack.wait_for([task.id], finished, timeout_s=stack.config.timeouts.heartbeat + 25)
    # Then the task runs again after its backoff, long before its lease would have lapsed
    assert (done.status, done.attempt) == (TaskStatus.SUCCESS, 2)
    assert done.claimed_at is not None
    timeouts = stack.config.timeouts
    assert done.claimed_at.timestamp() - killed_at < timeouts.heartbeat - timeouts.heartbeat_interval - 1
    # And the lost attempt is in its history: the executor that ran it, and how the loss was seen (by its host)
    [lost] = done.errors
    executor = f"{socket.gethostname()}:{killed[0]}"
    assert (lost.type, lost.attempt, lost.host) == ("LostExecution", 1, executor)
    assert (
        lost.message
        == f"attempt 1 was lost: its executor {executor} ended while running it, as its host saw its connection close"
    )
    assert killed_at <= lost.at.timestamp() < killed_at + timeouts.heartbeat_interval
    # And the executor's death shows in the host's JSON log only: no raw traceback of its broken connections
    host.send_signal(signal.SIGTERM)
    assert host.wait(timeout=30) == 0
    lines = log.read_text().splitlines()
    raw = [line for line in lines if line.strip() and not line.startswith("{")]
    assert raw == [], raw[:20]
    # And it names the task the executor held (once: its other threads held none), with the task's keys
    ended = [json.loads(line) for line in lines if "ended while running task" in line]
    assert [(e["task_id"], e["attempt"], e["level"]) for e in ended] == [(task.id, 1, "WARNING")], ended


def test_sigterm_drains_the_host_and_lets_running_tasks_finish(stack: RunningStack, worker_host: Host) -> None:
    host = worker_host(executors=1, threads=1)
    task = schedule(stack, payload={"seconds": 3})
    stack.wait_for([task.id], lambda t: t.status in (TaskStatus.CLAIMED, TaskStatus.PROCESSING))
    host.send_signal(signal.SIGTERM)
    assert host.wait(timeout=30) == 0
    done = stack.store.get(task.id)
    assert done is not None and (done.status, done.attempt) == (TaskStatus.SUCCESS, 1)


def test_a_second_sigterm_cuts_the_drain_short_and_the_running_task_runs_again(
    stack: RunningStack, worker_host: Host, tmp_path: Path
) -> None:
    # The second signal lands while the drain waits for a 10 s long poll, then while it waits for the executors
    cut = []
    for round_, (receive_wait, after_s) in enumerate([(10, 0.0), (1, 3.0)]):
        # Given a host draining while its one thread runs a 2-minute task (the first round's task may come back to
        # the second round's host after its backoff: its second attempt is quick)
        log = tmp_path / f"host-{round_}.log"
        host = worker_host(executors=1, threads=1, receive_wait=receive_wait, log=log)
        cut.append(schedule(stack, **{"lambda": "sleepy", "payload": {"seconds": 120}}))
        stack.wait_for([cut[-1].id], lambda t: t.status is TaskStatus.PROCESSING)
        host.send_signal(signal.SIGTERM)
        wait_for_line(log, "draining", host)
        time.sleep(after_s)
        executors = executors_of(host.pid)
        # When it is sent SIGTERM again
        host.send_signal(signal.SIGTERM)
        # Then it stops within seconds (the drain alone would have waited up to 110 s), naming what it stopped
        assert host.wait(timeout=8) == 0
        assert re.search(r"stopping \d+ executor\(s\) with their running tasks", log.read_text())
        assert executors and not any(alive(pid) for pid in executors)
    # And no task is lost: each attempt cut short was recorded as lost by its host as it stopped, and another
    # host runs each again
    assert [[(e.type, "as its host saw" in e.message) for e in stack.store.get(t.id).errors] for t in cut] == [  # type: ignore[union-attr]
        [("LostExecution", True)]
    ] * 2
    worker_host(executors=1, threads=1)
    done = stack.wait_for([t.id for t in cut], finished, timeout_s=stack.config.timeouts.heartbeat + 25)
    assert [(t.status, t.attempt) for t in done] == [(TaskStatus.SUCCESS, 2)] * 2


def test_sigterm_to_the_whole_process_group_drains_the_host_as_well(stack: RunningStack, worker_host: Host) -> None:
    # Given a host running a task, stopped as systemd stops a service: SIGTERM to each of its processes
    host = worker_host(executors=1, threads=1)
    task = schedule(stack, payload={"seconds": 3})
    stack.wait_for([task.id], lambda t: t.status in (TaskStatus.CLAIMED, TaskStatus.PROCESSING))
    os.killpg(host.pid, signal.SIGTERM)
    # Then the host still waits for the task: its executors, and the fork server it learns their exits from, go on
    assert host.wait(timeout=30) == 0
    done = stack.store.get(task.id)
    assert done is not None and (done.status, done.attempt) == (TaskStatus.SUCCESS, 1)


def test_a_killed_host_leaves_no_process_behind(stack: RunningStack, worker_host: Host, tmp_path: Path) -> None:
    # Given a host with two executors for each lambda, forked by its fork server
    host = worker_host(executors=2, threads=1, log=tmp_path / "host.log")
    executors = executors_of(host.pid)
    assert len(executors) == 2 * len(stack.config.lambdas)
    helpers = children_of(host.pid)  # the fork server and multiprocessing's resource tracker
    # When the host is killed (only the host: its processes are not signalled)
    host.kill()
    host.wait(timeout=10)
    # Then the executors see their connections close and end, and the fork server and tracker follow
    deadline = time.monotonic() + 20
    while any(alive(pid) for pid in executors + helpers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [pid for pid in executors + helpers if alive(pid)] == []


def test_an_executor_runs_its_atexit_handlers_as_it_ends(
    stack: RunningStack, worker_host: Host, tmp_path: Path
) -> None:
    # Given a host whose lambdas module registers an atexit handler (forked executors leave through os._exit)
    log = tmp_path / "host.log"
    host = worker_host(executors=2, log=log, lambdas="tests.e2e.exit_lambdas:lambdas", **{AT_EXIT_ENV: str(tmp_path)})
    executors = executors_of(host.pid)
    # When the host drains and its executors end
    host.send_signal(signal.SIGTERM)
    assert host.wait(timeout=30) == 0
    # Then each of them ran the handler, as the host did
    assert {int(p.name) for p in tmp_path.iterdir() if p.name.isdigit()} == {host.pid, *executors}


def test_a_host_serves_the_lambda_atf_lambda_names(stack: RunningStack, worker_host: Host, tmp_path: Path) -> None:
    # Given a host started as the CDK app's worker service starts it: ATF_LAMBDA set, no --only
    log = tmp_path / "host.log"
    worker_host(executors=1, threads=2, log=log, ATF_LAMBDA="sleepy")
    # Then it serves that lambda only: one executor of two threads, for sleepy
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    messages = [line["message"] for line in lines]
    assert "worker host serving sleepy" in messages
    assert "worker host ready: 2 executor threads connected" in messages
