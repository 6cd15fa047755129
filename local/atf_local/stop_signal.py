"""Wait in a process's main thread until SIGTERM or SIGINT asks it to stop; start the children it stops."""

from __future__ import annotations

import signal
import subprocess
import threading
from typing import Any


class StopSignal:
    """SIGTERM and SIGINT set this; install it before starting anything that may take a while.

    Python runs a signal's handler only in the main thread, between two instructions. The kernel may
    deliver the signal to any thread (a server's, here), and then a main thread blocked in an untimed
    wait on a lock is not woken: the handler waits for good. Seen: `atf_local serve` ignoring the e2e
    suite's SIGINT. So the wait here wakes up every `poll_s` and lets pending handlers run.
    """

    def __init__(self) -> None:
        self._stopped = threading.Event()
        signal.signal(signal.SIGTERM, self._set)
        signal.signal(signal.SIGINT, self._set)

    def _set(self, *_: object) -> None:
        self._stopped.set()

    def wait(self, poll_s: float = 0.5) -> None:
        while not self._stopped.wait(poll_s):
            pass


def start_child(command: list[str], **options: Any) -> subprocess.Popen[bytes]:
    """Start a child that its parent stops (SIGTERM), deaf to SIGINT.

    Ctrl-C at a terminal signals its whole foreground process group, the stack's children with it: each
    printed a KeyboardInterrupt traceback (the SQS server from its wait, a consumer from its imports, even
    from Python's own start-up) while the parent was stopping them anyway. SIGINT blocked in this thread as
    it forks stays blocked in the child across exec, so the child never takes one; here it stays pending
    and is handled as soon as the mask is restored, so none is lost.
    """
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        return subprocess.Popen(command, **options)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
