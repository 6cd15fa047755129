"""A real worker host reports its health, and the probe the container runs reads it: healthy while it
serves; unhealthy, naming what, once part of it is dead for good while the process lives on."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from subprocess import Popen

from atf_local.environment import REPO
from atf_local.process_tree import executors_of
from tests.e2e.conftest import RunningStack

Host = Callable[..., "Popen[bytes]"]


def probe(*command: str, **env: str) -> tuple[int, str]:
    """The probe as a container runs it: exit status and its one line."""
    result = subprocess.run(
        [sys.executable, *command], cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True, timeout=60
    )
    [line] = result.stdout.splitlines()
    return result.returncode, line


def cli_probe(health: Path) -> tuple[int, str]:
    return probe("-m", "atf_sdk.cli", "worker-health", "--health-file", str(health))


def probed_until(health: Path, wanted: Callable[[int, str], bool], timeout_s: float) -> str:
    """The probe's line once it is what is wanted."""
    deadline = time.monotonic() + timeout_s
    while True:
        status, line = cli_probe(health)
        if wanted(status, line):
            return line
        assert time.monotonic() < deadline, f"not yet after {timeout_s} s: {status} {line}"
        time.sleep(1)


def test_a_serving_host_is_healthy_and_a_stopped_one_has_no_report(
    stack: RunningStack, worker_host: Host, tmp_path: Path, short_tmp: Path
) -> None:
    # Given a host told where to report through the environment, as the image's probe finds it too
    health = tmp_path / "health.json"
    host = worker_host(log=tmp_path / "host.log", ATF_HEALTH_FILE=str(health), TMPDIR=str(short_tmp))
    assert sorted(path.name for path in short_tmp.glob("atf-host-*/*")) == ["controller.sock", "host.lock"]
    # Then both forms of the probe say it is healthy, naming what it serves
    assert probe("-m", "atf_sdk.worker.health", ATF_HEALTH_FILE=str(health)) == (
        0,
        f"healthy: serving sleepy, work (pid {host.pid})",
    )
    assert cli_probe(health) == (0, f"healthy: serving sleepy, work (pid {host.pid})")
    # And once it has drained and stopped, there is no report to find
    host.send_signal(signal.SIGTERM)
    assert host.wait(timeout=30) == 0
    status, line = cli_probe(health)
    assert (status, line) == (
        1,
        f"unhealthy: no health report at {health}: the worker host has not started, or has stopped",
    )
    # Nor the directory of its executors' socket: every stopped host left one in the temporary directory
    assert list(short_tmp.iterdir()) == []


def test_a_host_whose_executors_cannot_get_work_is_unhealthy(
    stack: RunningStack, worker_host: Host, tmp_path: Path, short_tmp: Path
) -> None:
    # Given a healthy host
    health = tmp_path / "health.json"
    host = worker_host(log=tmp_path / "host.log", ATF_HEALTH_FILE=str(health), TMPDIR=str(short_tmp))
    assert cli_probe(health)[0] == 0
    # When the socket its executors ask for work on is removed (a /tmp cleaner), and its executors die
    [socket_file] = short_tmp.glob("atf-host-*/controller.sock")
    socket_file.unlink()
    for pid in executors_of(host.pid):
        os.kill(pid, signal.SIGKILL)
    # Then it respawns them, each ends as it cannot connect, and the probe names the pools that are dead
    first = probed_until(health, lambda status, _: status == 1, timeout_s=120)
    assert first.startswith("unhealthy: executor pool "), first
    looping = (
        r"executor pool {}: its executors exited (\d+) times in a row within 30 s of starting \(last exit code 0\)"
    )
    line = probed_until(health, lambda _, line: all(f"pool {p}:" in line for p in ("sleepy", "work")), timeout_s=60)
    found = [re.search(looping.format(pool), line) for pool in ("sleepy", "work")]
    assert line.startswith("unhealthy: ") and all(found), line
    assert all(int(match[1]) >= 5 for match in found if match), line
    assert host.poll() is None  # the process lives on: only the probe can tell it is of no use
    # And once the host is killed outright, the report it left says it is not running
    os.killpg(host.pid, signal.SIGKILL)
    host.wait(timeout=30)
    assert cli_probe(health) == (1, f"unhealthy: the worker host (pid {host.pid}) that wrote {health} is not running")
