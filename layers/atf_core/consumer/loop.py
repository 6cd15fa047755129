"""The consumer's loop inside one invocation.

EventBridge ticks at most once a minute, so one invocation polls every
poll_interval until shortly before its time runs out; the next tick starts
the next invocation. A duplicated tick only means two consumers for a while,
which the conditional writes make harmless.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from atf_core.consumer.consumer import Consumer
from atf_core.consumer.poll import PollReport


def run_until(
    consumer: Consumer,
    remaining_s: Callable[[], float],
    poll_interval: float,
    margin_s: float = 2.0,
    on_poll: Callable[[PollReport, float], None] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    on_error: Callable[[Exception], None] = lambda error: None,
) -> int:
    """Poll until less than margin_s + one poll is left; returns the number of polls. A poll that raises (say
    the gates item could not be read past botocore's retries) is told to `on_error` and the next one comes a
    poll interval later: ending the invocation would leave every lambda unscheduled until the next tick."""
    polls = 0
    while remaining_s() > margin_s + poll_interval and not should_stop():
        started = time.monotonic()
        try:
            report = consumer.poll()
        except Exception as error:  # noqa: BLE001 - told, then polled again
            on_error(error)
            time.sleep(poll_interval)
            continue
        elapsed = time.monotonic() - started
        polls += 1
        if on_poll is not None:
            on_poll(report, elapsed)
        # A backlog is worked off at once (queues permitting), not one poll interval at a time.
        pause = 0.05 if report.saturated else poll_interval - elapsed
        time.sleep(max(0.0, pause))
    return polls
