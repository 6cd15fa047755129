"""An executor takes the stop signals and drops them (the host decides when it stops), while the processes its
callbacks start keep the default dispositions: a callback can terminate() the child it started."""

from __future__ import annotations

import subprocess
import sys

ABSORBING = """
import os, signal, subprocess
from atf_sdk.worker.stop_signals import absorb_stop_signals
absorb_stop_signals()
os.kill(os.getpid(), signal.SIGTERM)  # to the whole process group, say: dropped
os.kill(os.getpid(), signal.SIGINT)
child = subprocess.Popen(["sleep", "30"])
child.terminate()
try:
    print("child ended by", -child.wait(5))
except subprocess.TimeoutExpired:
    child.kill()
    print("child ignored SIGTERM")
"""


def test_an_executor_drops_the_stop_signals_and_a_callbacks_child_can_still_be_terminated() -> None:
    done = subprocess.run([sys.executable, "-c", ABSORBING], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "child ended by 15"
