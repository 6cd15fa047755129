"""What a worker host's fork server imports before it forks executors (atf_sdk.worker.preload) must be safe to
fork from: no thread (a lock one holds as the server forks stays held in the executor), no AWS session or client
(each executor makes its own), and a SIGTERM to the host's process group must not end the server (it is
taken and dropped: ignored, it would stay ignored in the processes callbacks start)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from atf_sdk.worker.host import PRELOAD

PROGRAM = f"""
import signal, threading
import botocore.session

made = []
create_client = botocore.session.Session.create_client
botocore.session.Session.create_client = lambda self, *a, **k: made.append(a) or create_client(self, *a, **k)
import boto3
import {PRELOAD}
print(threading.active_count(), len(made), boto3.DEFAULT_SESSION, callable(signal.getsignal(signal.SIGTERM)))
"""


def test_the_fork_server_imports_the_executor_and_nothing_it_imports_starts_a_thread_or_a_client() -> None:
    # The fork server skips a module it cannot import without a word: the executors would import it all anew.
    assert importlib.util.find_spec(PRELOAD) is not None
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["1", "0", "None", "True"]


# A Ctrl-C to the host's process group while the fork server's interpreter starts and imports its preload: the
# first preloaded module sends it (as a terminal would, to the whole group) before the framework's preload runs.
INTERRUPTING = "import os, signal, time\nos.killpg(0, signal.SIGINT)\ntime.sleep(0.3)\n"
STARTING = f"""
import multiprocessing, multiprocessing.forkserver, os, signal, sys, time
from atf_sdk.worker import host

stops = []
signal.signal(signal.SIGINT, lambda *_: stops.append("SIGINT"))  # the host's handler, as serve() installs it
multiprocessing.forkserver.set_forkserver_preload(["interrupting", "{PRELOAD}"])
{{start}}
executor = multiprocessing.get_context("forkserver").Process(target=os.getpid)
executor.start()
executor.join(30)
time.sleep(0.3)
print(executor.exitcode, stops)
"""


def test_a_ctrl_c_while_the_fork_server_starts_ends_neither_it_nor_the_host_and_reaches_the_host_once(
    tmp_path: Path,
) -> None:
    # Given a fork server whose start a Ctrl-C to the process group interrupts
    (tmp_path / "interrupting.py").write_text(INTERRUPTING)
    program = STARTING.format(start="host._start_fork_server()")
    # When the host starts it, in a process group of its own
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])},
    )
    # Then the server forks an executor, the host took the Ctrl-C once, in its handler, and nothing was printed
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "0 ['SIGINT']", "")
