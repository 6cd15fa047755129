"""Time as the framework reads it: a clock handed to each component, one clock per process.

A component that reads the time takes a `clock` (a function returning the current
time, aware, in UTC) and reads the time only through it; its default is the system
clock, `atf_core.schema.utcnow`. The composition roots (the consumer's Lambda handler, the frontend's
services, the worker host and its executors) hand their components `process_clock`,
which calls the clock installed with `set_process_clock`, the system clock unless
something outside the framework installed another. That call is the one seam through
which a test bench moves a process's time without touching the framework's code: the
fault-injection suite shifts one component's clock to show that offsets between
components delay recovery but never break a guarantee (atf_local.instruments).

(Durations are measured on time.monotonic, which no clock offset touches.)
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from atf_core.schema import utcnow

Clock = Callable[[], datetime]
_installed: Clock = utcnow


def process_clock() -> datetime:
    """The time by this process's clock: what the composition roots hand their components."""
    return _installed()


def set_process_clock(clock: Clock) -> None:
    """Install the clock `process_clock` reads from now on (the system clock: `utcnow`)."""
    global _installed
    _installed = clock
