"""A process serving the local stack stops on SIGINT or SIGTERM, whichever thread the kernel hands it to."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from atf_local.environment import REPO

# The signal goes to a thread other than the main one, as the kernel may deliver a process's signal.
SIGNALLED_ELSEWHERE = """
import signal, sys, threading, time
from atf_local.stop_signal import StopSignal

stop = StopSignal()

def elsewhere():
    time.sleep(0.2)
    signal.pthread_kill(threading.get_ident(), getattr(signal, sys.argv[1]))
    time.sleep(60)

threading.Thread(target=elsewhere, daemon=True).start()
stop.wait()
print("stopped")
"""


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_a_signal_delivered_to_another_thread_stops_the_wait(name: str) -> None:
    # Given a main thread waiting to be stopped, when a server thread receives the signal
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SIGNALLED_ELSEWHERE), name],
        cwd=REPO, capture_output=True, text=True, timeout=20,
    )  # fmt: skip
    # Then the wait ends (an untimed Event.wait() never would: the timeout above fails the test)
    assert (run.returncode, run.stdout.strip()) == (0, "stopped"), run.stderr
