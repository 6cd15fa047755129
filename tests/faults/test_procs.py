"""The harness finds a worker host's executors: the children of its fork server, never the server itself."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from atf_local.faults.procs import Cluster
from atf_local.instruments.history import History
from atf_local.process_tree import children_of, executors_of

HOST = """
import multiprocessing, sys, time

if __name__ == "__main__":
    context = multiprocessing.get_context("forkserver")
    children = [context.Process(target=time.sleep, args=(60,)) for _ in range(2)]
    for child in children:
        child.start()
    print(*[child.pid for child in children], flush=True)
    time.sleep(60)
"""


def test_a_hosts_executors_are_its_fork_servers_children(tmp_path: Path) -> None:
    program = tmp_path / "host.py"
    program.write_text(HOST)
    host = subprocess.Popen([sys.executable, str(program)], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert host.stdout is not None
        started = sorted(int(pid) for pid in host.stdout.readline().split())
        assert len(started) == 2
        helpers = children_of(host.pid)  # the fork server and the resource tracker
        assert sorted(executors_of(host.pid)) == started
        assert not set(helpers) & set(started)
    finally:
        os.killpg(host.pid, signal.SIGKILL)
        host.wait(timeout=10)


def test_an_interrupt_while_waiting_on_one_leftover_leaves_none_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "logs").mkdir()
    # Port 9 (discard) refuses at once: no stack answers for its SQS endpoint
    cluster = Cluster(tmp_path, "http://127.0.0.1:9", "{}", History(tmp_path / "history", "harness"))
    first, second = (cluster.add(name, "stack", ["sleep", "60"], lambda _: {}) for name in ("one", "two"))
    assert first.popen is not None and second.popen is not None
    try:

        def interrupted(timeout: float | None = None) -> int:
            raise KeyboardInterrupt  # a third Ctrl-C, while the first leftover is reaped

        monkeypatch.setattr(first.popen, "wait", interrupted)
        with pytest.raises(KeyboardInterrupt):
            cluster.kill_leftovers()
        assert second.popen.wait(timeout=5) == -signal.SIGKILL
    finally:
        for popen in (first.popen, second.popen):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGKILL)
