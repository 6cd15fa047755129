"""What stops a worker host (Ctrl-C, and ECS's or systemd's stop), and holding them off while it starts.

The host decides when its executors stop: they and their fork server ignore these signals."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


@contextmanager
def stop_signals_held() -> Iterator[None]:
    """Keep the stop signals pending for the block, delivered as it ends. For the host's own imports and
    configuration only: a KeyboardInterrupt raised in a class body comes out as a RuntimeError (Python wraps it
    in __set_name__), which no handler can tell from a bug. Never around a team's code, which may hang."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def ignore_stop_signals() -> dict[signal.Signals, Any]:
    """Ignore the stop signals from now on, also across an exec (the fork server as the host starts it); the
    handlers they had, to restore."""
    return {stop_signal: signal.signal(stop_signal, signal.SIG_IGN) for stop_signal in STOP_SIGNALS}


def absorb_stop_signals() -> None:
    """Take the stop signals and do nothing with them (an executor, the fork server once started). Unlike an
    ignored signal, a handled one is reset to its default by exec: the processes a callback starts (ffmpeg, a
    shell) can be stopped by it with terminate(), which an ignored SIGTERM, inherited, made do nothing.
    Interrupted system calls are restarted, as they would be were the signal ignored."""
    for stop_signal in STOP_SIGNALS:
        signal.signal(stop_signal, _absorbed)
        signal.siginterrupt(stop_signal, False)


def _absorbed(signum: int, frame: Any) -> None:
    """The host decides when its executors stop: a stop signal sent to the whole process group is dropped."""
