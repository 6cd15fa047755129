"""A worker host's health: receivers, executor pools and the NextWork server as the host judges them, the
report it writes, and the probe that reads it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Client
from pathlib import Path
from typing import Any

import pytest

from atf_core.config import StackConfig
from atf_core.store.tasks import DynamoTaskStore
from atf_sdk.worker.controller import Controller, ControllerSettings, NextWorkServer, _stopped
from atf_sdk.worker.health import (
    CRASH_LOOP_EXITS,
    EXIT_TIMED_OUT,
    SETTLE_S,
    STALE_AFTER_S,
    ExecutorStarts,
    HealthFile,
    HealthReport,
    ReceiverStatus,
    check,
    receiver_notes,
    receiver_problems,
)
from atf_sdk.worker.host import HostSettings, WorkerHost
from atf_sdk.worker.protocol import NextWork, NoWork

STUCK_S = 100.0


# -- receivers -------------------------------------------------------------------


def test_a_receiver_that_ended_or_hangs_is_a_problem_and_one_that_fails_a_note() -> None:
    receivers = [
        ReceiverStatus("work/high", alive=False, idle_s=1.0, failures=0),
        ReceiverStatus("work/normal", alive=True, idle_s=STUCK_S + 1, failures=0),
        ReceiverStatus("work/low", alive=True, idle_s=STUCK_S - 1, failures=3),
        ReceiverStatus("sleepy/normal", alive=True, idle_s=0.1, failures=0),
    ]
    assert receiver_problems(receivers, STUCK_S) == [
        "receiver work/high has ended",
        f"receiver work/normal is stuck: no turn of its loop for {STUCK_S + 1:.0f} s",
    ]
    assert receiver_notes(receivers) == ["receiver work/low: 3 receives failed in a row"]


class Dies(BaseException):
    """What no `except Exception` catches: the one way out of a receive loop besides draining."""


class DyingLongPoll:
    """A long-poll client whose receive ends the thread that calls it (its timeouts are the real client's)."""

    def __init__(self, real: Any) -> None:
        self.meta = real.meta

    def receive_message(self, **_: Any) -> dict[str, Any]:
        raise Dies


class FailingLongPoll(DyingLongPoll):
    def receive_message(self, **_: Any) -> dict[str, Any]:
        raise ConnectionError("the queue is not there")


def controller(aws: Any, config: StackConfig, long_poll: Any) -> Controller:
    store = DynamoTaskStore(aws.dynamodb, config)
    return Controller(
        store, aws.sqs, long_poll, config, ["sleepy"], ControllerSettings(receive_wait_s=1, prefetch_per_lambda=None)
    )


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the thread's end is the point
def test_a_controller_reports_a_receiver_thread_that_ended(aws: Any, config: StackConfig) -> None:
    dying = controller(aws, config, DyingLongPoll(aws.sqs_long_poll))
    [thread] = dying.start_receivers()
    thread.join(10)
    [status] = dying.receivers()
    assert (status.name, status.alive) == ("sleepy/normal", False)
    assert receiver_problems(dying.receivers(), dying.receiver_stuck_after_s) == ["receiver sleepy/normal has ended"]


def test_a_receiver_whose_receives_fail_lives_on_and_counts_them(aws: Any, config: StackConfig) -> None:
    failing = controller(aws, config, FailingLongPoll(aws.sqs_long_poll))
    failing.start_receivers()
    deadline = time.monotonic() + 10
    while failing.receivers()[0].failures < 1:
        assert time.monotonic() < deadline, "the failure was never counted"
        time.sleep(0.05)
    [status] = failing.receivers()
    assert status.alive and status.idle_s < failing.receiver_stuck_after_s
    assert receiver_problems(failing.receivers(), failing.receiver_stuck_after_s) == []
    failing.drain()


def test_a_receiver_counts_as_stuck_only_past_its_longest_turn(aws: Any, config: StackConfig) -> None:
    # The long poll's three attempts of 2 + 25 s and their backoff, the longest wait after a failure, the slack.
    assert controller(aws, config, aws.sqs_long_poll).receiver_stuck_after_s == 3 * 27 + 2 + 4 + 15 + 60


# -- executor pools ----------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def crash(
    starts: ExecutorStarts, clock: Clock, times: int, lived_s: float = 1.0, code: int = 1, ran_a_task: bool = False
) -> None:
    for _ in range(times):
        clock.now += lived_s
        starts.exited("work", 0, code, ran_a_task)
        starts.started("work", 0)


def test_an_executor_that_keeps_dying_as_it_starts_is_a_dead_pool() -> None:
    clock = Clock()
    starts = ExecutorStarts(clock=clock)
    starts.started("work", 0)
    starts.started("work", 1)
    crash(starts, clock, CRASH_LOOP_EXITS - 1)
    assert starts.problems() == []  # respawned within bounds
    crash(starts, clock, 1, code=3)
    assert starts.problems() == [
        f"executor pool work: its executors exited {CRASH_LOOP_EXITS} times in a row within {SETTLE_S:g} s"
        " of starting (last exit code 3)"
    ]


def test_executors_ended_for_their_time_limit_are_not_a_crash_loop() -> None:
    """A lambda whose callbacks keep overrunning (a hung downstream) ends executor after executor on purpose:
    replacing the host would not help, so the pool stays healthy; a real crash after them counts from one."""
    clock = Clock()
    starts = ExecutorStarts(clock=clock)
    starts.started("work", 0)
    crash(starts, clock, 3 * CRASH_LOOP_EXITS, code=EXIT_TIMED_OUT)
    assert starts.problems() == []
    crash(starts, clock, CRASH_LOOP_EXITS - 1)
    assert starts.problems() == []


def test_executors_killed_by_the_tasks_they_ran_are_not_a_crash_loop() -> None:
    """Poison tasks that kill each executor they run on, retried seconds apart once their host records the
    loss: the executors did start, and a new host would fare no better; a crash before any task counts."""
    clock = Clock()
    starts = ExecutorStarts(clock=clock)
    starts.started("work", 0)
    crash(starts, clock, 3 * CRASH_LOOP_EXITS, code=-9, ran_a_task=True)
    assert starts.problems() == []
    crash(starts, clock, CRASH_LOOP_EXITS)
    assert len(starts.problems()) == 1


def test_a_pool_whose_replacement_settles_is_alive_again() -> None:
    clock = Clock()
    starts = ExecutorStarts(clock=clock)
    starts.started("work", 0)
    crash(starts, clock, CRASH_LOOP_EXITS)
    assert starts.problems() != []
    clock.now += SETTLE_S  # the last replacement has run long enough
    assert starts.problems() == []


def test_executors_that_die_now_and_then_are_replaced_not_a_dead_pool() -> None:
    clock = Clock()
    starts = ExecutorStarts(clock=clock)
    starts.started("work", 0)
    for _ in range(3 * CRASH_LOOP_EXITS):  # each ran a while before it died (a lost lease, the OOM killer)
        crash(starts, clock, 1, lived_s=SETTLE_S + 1)
    assert starts.problems() == []
    crash(starts, clock, CRASH_LOOP_EXITS - 1)  # the count of quick exits starts again after a long life
    assert starts.problems() == []


# -- the NextWork server -------------------------------------------------------------


class Idle:
    draining = False

    def next_work(self, lambda_name: str, wait_s: float, worker: str = "", wanted: Any = None) -> None:
        return None


def test_the_nextwork_server_outlives_a_connection_that_fails_its_handshake() -> None:
    # An executor killed while it connects leaves the listener's handshake half done: that ended the
    # server's thread, and with it every executor started after (they connect, and wait for ever).
    address = str(Path(tempfile.mkdtemp(prefix="atf-test-")) / "c.sock")
    server = NextWorkServer(Idle(), address, b"key")  # type: ignore[arg-type]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    answers: list[object] = []

    def ask() -> None:
        with Client(address, family="AF_UNIX", authkey=b"key") as executor:
            executor.send(NextWork("work", wait_s=0.01))
            answers.append(executor.recv())

    try:
        with socket.socket(socket.AF_UNIX) as half:
            half.connect(address)  # and hang up before the handshake
        asking = threading.Thread(target=ask, daemon=True)
        asking.start()
        asking.join(10)
        assert [type(a) for a in answers] == [NoWork], "the server no longer answers"
    finally:
        server.close()
        shutil.rmtree(Path(address).parent, ignore_errors=True)


class FailsOnce:
    """A controller whose first turn raises (say, giving back a refused claim's slot was throttled)."""

    draining = False

    def __init__(self) -> None:
        self.turns = 0

    def next_work(self, lambda_name: str, wait_s: float, worker: str = "", wanted: Any = None) -> None:
        self.turns += 1
        if self.turns == 1:
            raise RuntimeError("ThrottlingException")


def test_an_executor_thread_whose_turn_failed_is_still_served() -> None:
    # Given an executor thread connected to its host's server
    address = str(Path(tempfile.mkdtemp(prefix="atf-test-")) / "c.sock")
    controller = FailsOnce()
    server = NextWorkServer(controller, address, b"key")  # type: ignore[arg-type]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with Client(address, family="AF_UNIX", authkey=b"key") as executor:
            # When finding work for it raises, then it is answered (no work), not hung up on
            executor.send(NextWork("work", wait_s=0.01))
            assert isinstance(executor.recv(), NoWork)
            # And its next request is served: the thread did not end with the fault
            executor.send(NextWork("work", wait_s=0.01))
            assert isinstance(executor.recv(), NoWork) and controller.turns == 2
    finally:
        server.close()
        shutil.rmtree(Path(address).parent, ignore_errors=True)


class Asked:
    """A controller with a task for every request: records whether the server still wanted it for the asker."""

    draining = False

    def __init__(self) -> None:
        self.wanted: list[bool] = []

    def next_work(self, lambda_name: str, wait_s: float, worker: str, wanted: Callable[[], bool]) -> None:
        self.wanted.append(wanted())


def test_no_task_is_claimed_for_an_executor_whose_process_is_stopped() -> None:
    # Given an executor process that asked for work and was then stopped (SIGSTOP, a debugger)
    address = str(Path(tempfile.mkdtemp(prefix="atf-test-")) / "c.sock")
    controller = Asked()
    server = NextWorkServer(controller, address, b"key")  # type: ignore[arg-type]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    process = subprocess.Popen(["sleep", "60"])
    try:
        with Client(address, family="AF_UNIX", authkey=b"key") as connection:
            for sig in (signal.SIGSTOP, signal.SIGCONT):
                os.kill(process.pid, sig)
                _wait_for_state(process.pid, stopped=sig == signal.SIGSTOP)
                # When a task is there for its request
                connection.send(NextWork("work", wait_s=0.01, worker=f"{socket.gethostname()}:{process.pid}"))
                assert isinstance(connection.recv(), NoWork)
    finally:
        process.kill()
        process.wait()
        server.close()
        shutil.rmtree(Path(address).parent, ignore_errors=True)
    # Then it is not claimed for the stopped process (another executor takes it), and is once it runs again
    assert controller.wanted == [False, True]


def _wait_for_state(pid: int, stopped: bool) -> None:
    deadline = time.monotonic() + 10
    while _stopped(f"{socket.gethostname()}:{pid}") != stopped:
        assert time.monotonic() < deadline, f"pid {pid} never {'stopped' if stopped else 'resumed'}"
        time.sleep(0.01)


def test_a_host_whose_nextwork_server_is_not_running_says_so(aws: Any, config: StackConfig) -> None:
    host = WorkerHost(config, HostSettings("tests.e2e.lambdas:lambdas"), clients=aws)
    try:
        report = host.health()
    finally:
        host._release()
    assert report.problems == ["the NextWork server has stopped: no executor gets work"]
    assert (report.pid, report.state, report.lambdas) == (os.getpid(), "serving", ["sleepy", "work"])


# -- the report and the probe ----------------------------------------------------------


def report(**fields: Any) -> HealthReport:
    return HealthReport(**{"pid": os.getpid(), "at": time.time(), "state": "serving", "lambdas": ["work"], **fields})


def probed(tmp_path: Path, written: HealthReport | str | None, **options: Any) -> tuple[bool, str]:
    path = tmp_path / "health.json"
    if isinstance(written, HealthReport):
        HealthFile(path).write(written)
    elif written is not None:
        path.write_text(written)
    return check(path, **options)


def test_the_probe_says_healthy_with_what_the_host_serves_and_its_notes(tmp_path: Path) -> None:
    assert probed(tmp_path, report(lambdas=["work", "sleepy"])) == (True, f"serving work, sleepy (pid {os.getpid()})")
    noted = report(notes=["receiver work/low: 2 receives failed in a row"])
    assert probed(tmp_path, noted) == (
        True,
        f"serving work (pid {os.getpid()}); receiver work/low: 2 receives failed in a row",
    )


def test_the_probe_fails_on_the_problems_the_host_names(tmp_path: Path) -> None:
    problems = ["receiver work/high has ended", "executor pool work: its executors exited 5 times"]
    assert probed(tmp_path, report(problems=problems)) == (False, "; ".join(problems))
    assert probed(tmp_path, report(state="draining")) == (False, f"the worker host (pid {os.getpid()}) is draining")


def test_the_probe_fails_on_a_stale_report_or_a_host_that_is_gone(tmp_path: Path) -> None:
    old = report(at=time.time() - STALE_AFTER_S - 5)
    healthy, line = probed(tmp_path, old)
    assert not healthy and line.startswith(f"the worker host (pid {os.getpid()}) last reported 3") and "stuck" in line
    gone = probed(tmp_path, report(pid=4321), running=lambda pid: pid != 4321)
    assert gone == (False, f"the worker host (pid 4321) that wrote {tmp_path / 'health.json'} is not running")


@pytest.mark.parametrize("written", [None, "{not json", json.dumps({"pid": 1})])
def test_the_probe_fails_without_a_report_it_can_read(tmp_path: Path, written: str | None) -> None:
    healthy, line = probed(tmp_path, written)
    assert not healthy and str(tmp_path / "health.json") in line
    assert ("has not started, or has stopped" in line) == (written is None)


def test_a_host_removes_only_its_own_report(tmp_path: Path) -> None:
    path = tmp_path / "health.json"
    HealthFile(path).write(report(pid=4321))
    HealthFile(path).remove(os.getpid())
    assert path.exists()
    HealthFile(path).remove(4321)
    assert not path.exists()
