"""The harness finds a worker host's executors: the children of its fork server, never the server itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

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
