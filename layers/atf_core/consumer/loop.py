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
    """Poll every poll_interval while a poll, its interval and one more poll fit in `left_s` (at the pace of
    the poll before); then, given `next_start_s` (how long after this invocation's time is up the next one's
    first poll may come), one last poll that reads that much past the end of this one's time further than the
    lookahead, so what falls due before the next invocation polls is sent by this one. Returns the polls made.

    A poll that raises (say the gates item could not be read past botocore's retries) is told to `on_error`
    and the next one comes a poll interval later: ending the invocation would leave every lambda unscheduled
    until the next tick."""
    polls, took = 0, 0.0
    while not should_stop() and left_s() >= max(poll_interval, took) + took:
        report, took = _poll(consumer, 0.0, on_poll, on_error)
        polls += report is not None
        # A backlog is worked off at once (queues permitting), not one poll interval at a time.
        pause = poll_interval if report is None else (0.05 if report.saturated else poll_interval - took)
        time.sleep(max(0.0, min(pause, left_s() - took)))  # never into the last poll's time
    if next_start_s is not None and not should_stop():
        report, _ = _poll(consumer, max(0.0, left_s()) + next_start_s, on_poll, on_error)
        polls += report is not None
    return polls


def _poll(
    consumer: Consumer,
    handover_s: float,
    on_poll: Callable[[PollReport, float], None] | None,
    on_error: Callable[[Exception], None],
) -> tuple[PollReport | None, float]:
    """One poll, told to `on_poll` or its error to `on_error`; its report (None if it raised) and its time."""
    started = time.monotonic()
    try:
        report = consumer.poll(handover_s)
    except Exception as error:  # noqa: BLE001 - told; the loop polls on
        on_error(error)
        return None, time.monotonic() - started
    took = time.monotonic() - started
    if on_poll is not None:
        on_poll(report, took)
    return report, took
