"""A real worker host (controller and executor processes) with metrics on: what reaches its stdout."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from atf_core.schema import ScheduleRequest, TaskStatus
from atf_core.tasks import Scheduling
from atf_core.telemetry import WORKER_SERVICE
from atf_local.environment import REPO
from tests.e2e.conftest import RunningStack, stack  # noqa: F401 - the fixture
from tests.telemetry.emf import named


def _start_host(running: RunningStack, log: Path) -> subprocess.Popen[bytes]:
    command = [
        sys.executable, "-m", "atf_sdk.cli", "worker", "tests.e2e.lambdas:lambdas", "--only", "work",
        "--config", str(running.config_path), "--executors", "1", "--threads", "2", "--receive-wait", "1",
    ]  # fmt: skip
    env = {**running.env(), "POWERTOOLS_METRICS_DISABLED": "false", "POWERTOOLS_SERVICE_NAME": WORKER_SERVICE}
    with log.open("wb") as out:
        return subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)


def _wait_for(log: Path, needle: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while needle not in log.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"{needle!r} never appeared in the host's output"
        time.sleep(0.1)


def _json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_a_host_emits_metrics_per_queue_and_logs_each_task_as_json(stack: RunningStack, tmp_path: Path) -> None:  # noqa: F811
    log = tmp_path / "host.log"
    host = _start_host(stack, log)
    try:
        _wait_for(log, "worker host ready")
        scheduling = Scheduling(stack.store, stack.config)
        payloads = [{"seconds": 0.01}, {"seconds": 0.01, "succeed_on": 2}, {"seconds": 0.01, "fatal": True}]
        ids = [
            scheduling.schedule(
                ScheduleRequest.model_validate({"lambda": "work", "priority": "high", "payload": p})
            ).task.id
            for p in payloads
        ]
        done = stack.wait_for(ids, lambda t: t.status.terminal, timeout_s=40)
    finally:
        host.send_signal(signal.SIGTERM)
        host.wait(timeout=60)
    assert [t.status for t in done] == [TaskStatus.SUCCESS, TaskStatus.SUCCESS, TaskStatus.FATAL_FAILURE]

    out = log.read_text()
    queue = {"lambda": "work", "priority": "high"}
    totals = {m: sum(p.total for p in named(out, m, **queue)) for m in ("Claimed", "Started", "Succeeded")}
    assert totals == {"Claimed": 4, "Started": 4, "Succeeded": 2}  # the retried task ran twice
    assert sum(p.total for p in named(out, "RetriableFailures", **queue)) == 1
    assert sum(p.total for p in named(out, "FatalFailures", **queue)) == 1
    lags = [v for p in named(out, "StartLagMs", **queue) for v in p.values]
    assert len(lags) == 3  # first attempts only
    assert {p.dimensions["service"] for p in named(out, "Started")} == {WORKER_SERVICE}

    lines = _json_lines(out)
    for task_id in ids:
        mine = [line for line in lines if line.get("task_id") == task_id]
        assert {"task started", "task finished"} <= {line["message"] for line in mine}
    retried = [line for line in lines if line.get("task_id") == ids[1] and line["message"] == "task finished"]
    assert [(line["attempt"], line["outcome"]) for line in retried] == [(1, "retriable_failure"), (2, "success")]
    assert any(line["message"].startswith("worker host serving") for line in lines)  # the host's own lines too


@pytest.mark.parametrize("mode", ["auto", "emf"])
def test_a_host_on_a_terminal_keeps_metrics_off_it_unless_asked(stack: RunningStack, mode: str) -> None:  # noqa: F811
    # Given a host started by hand on an interactive terminal, nothing in its environment about metrics
    command = [
        sys.executable, "-m", "atf_sdk.cli", "worker", "tests.e2e.lambdas:lambdas", "--only", "work", "--metrics", mode,
        "--config", str(stack.config_path), "--executors", "1", "--threads", "1", "--receive-wait", "1",
    ]  # fmt: skip
    env = {k: v for k, v in stack.env().items() if k not in ("POWERTOOLS_METRICS_DISABLED", "POWERTOOLS_DEV")}
    leader, terminal = pty.openpty()
    output = bytearray()
    reader = threading.Thread(target=_read_all, args=(leader, output), daemon=True)
    reader.start()
    host = subprocess.Popen(command, cwd=REPO, env=env, stdin=terminal, stdout=terminal, stderr=terminal)
    os.close(terminal)
    try:
        deadline = time.monotonic() + 60
        while b"worker host ready" not in output:
            assert time.monotonic() < deadline and host.poll() is None, output.decode(errors="replace")
            time.sleep(0.05)
        request = ScheduleRequest.model_validate({"lambda": "work", "payload": {"seconds": 0.01}})
        task = Scheduling(stack.store, stack.config).schedule(request).task
        stack.wait_for([task.id], lambda t: t.status.terminal)
    finally:
        host.send_signal(signal.SIGTERM)
        host.wait(timeout=60)  # its metric buffers flush what they hold as the processes stop
    reader.join(timeout=10)
    text = output.decode(errors="replace")
    emf = [line for line in text.splitlines() if '"_aws"' in line]
    if mode == "auto":  # Then no EMF reaches the terminal, and the host says so and how to get it
        assert emf == [], emf[:3]
        assert "metrics: off (stdout is a terminal: --metrics emf prints them)" in text
    else:  # (asked for, they do reach it: the check above can see them)
        assert sum(p.total for p in named(text, "Succeeded", **{"lambda": "work"})) == 1, text[-2000:]


def _read_all(fd: int, into: bytearray) -> None:
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the terminal's last writer closed it
            return
        if not chunk:
            return
        into.extend(chunk)
