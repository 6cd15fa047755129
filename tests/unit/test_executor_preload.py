"""What a worker host's fork server imports before it forks executors (atf_sdk.worker.preload) must be safe to
fork from: no thread (a lock one holds as the server forks stays held in the executor), no AWS session or client
(each executor makes its own), and a SIGTERM to the host's process group must not end the server."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

from atf_sdk.worker.host import PRELOAD

PROGRAM = f"""
import signal, threading
import botocore.session

made = []
create_client = botocore.session.Session.create_client
botocore.session.Session.create_client = lambda self, *a, **k: made.append(a) or create_client(self, *a, **k)
import boto3
import {PRELOAD}
print(threading.active_count(), len(made), boto3.DEFAULT_SESSION, signal.getsignal(signal.SIGTERM) is signal.SIG_IGN)
"""


def test_the_fork_server_imports_the_executor_and_nothing_it_imports_starts_a_thread_or_a_client() -> None:
    # The fork server skips a module it cannot import without a word: the executors would import it all anew.
    assert importlib.util.find_spec(PRELOAD) is not None
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["1", "0", "None", "True"]
