"""The consumer's loop inside one invocation: a poll every poll_interval while the invocation's time lasts
(tick.py says how long, and how far the last polls read ahead)."""

from __future__ import annotations

import time
from collections.abc import Callable

from atf_core.consumer.consumer import Consumer
from atf_core.consumer.poll import PollReport


def run_until(
    consumer: Consumer,
    left_s: Callable[[], float],
    poll_interval: float,
    on_poll: Callable[[PollReport, float], None] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    on_error: Callable[[Exception], None] = lambda error: None,
    next_start_s: float | None = None,
) -> int:
    """Poll while another poll and its interval fit in `left_s` (at least once: an invocation whose tick came
    late still covers its hand-over); returns the number of polls. With `next_start_s` (how long after this
    invocation's time is up the next one may poll), the last poll reads that far past the end of this one's
    time further than the lookahead. A poll that raises (say the gates item could not be read past botocore's
    retries) is told to `on_error` and the next one comes a poll interval later: ending the invocation would
    leave every lambda unscheduled until the next tick."""
    polls, first, took = 0, True, poll_interval
    while not should_stop() and (first or left_s() > poll_interval):
        first, started, left = False, time.monotonic(), left_s()
        # Last if, at the pace of the poll before, no other fits after it
        last = next_start_s is not None and left <= poll_interval + max(took, poll_interval)
        try:
            report = consumer.poll(max(0.0, left) + (next_start_s or 0.0) if last else 0.0)
        except Exception as error:  # noqa: BLE001 - told, then polled again
            on_error(error)
            time.sleep(poll_interval)
            continue
        took = time.monotonic() - started
        polls += 1
        if on_poll is not None:
            on_poll(report, took)
        # A backlog is worked off at once (queues permitting), not one poll interval at a time.
        pause = 0.05 if report.saturated else poll_interval - took
        time.sleep(max(0.0, min(pause, left_s())))
    return polls
