"""The consumer's loop inside one invocation: a poll that raises (the gates item unreadable past botocore's
retries) is told and the loop polls on. It ended the invocation, and with it every lambda's scheduling until
the next tick, up to a minute later."""

from __future__ import annotations

import time

from atf_core.consumer.loop import run_until
from atf_core.consumer.poll import PollReport


class FailsOnce:
    def __init__(self) -> None:
        self.polls = 0

    def poll(self) -> PollReport:
        self.polls += 1
        if self.polls == 2:
            raise TimeoutError("gates item: read timeout")
        return PollReport()


def test_a_failed_poll_is_told_and_the_invocation_polls_on() -> None:
    # Given an invocation of 0.5 s polling every 20 ms, whose second poll raises
    consumer, errors = FailsOnce(), []
    ends = time.monotonic() + 0.5
    # When it runs
    polls = run_until(
        consumer,  # type: ignore[arg-type]
        remaining_s=lambda: ends - time.monotonic(),
        poll_interval=0.02,
        margin_s=0.0,
        on_error=errors.append,
    )
    # Then the fault was told once, and the polls went on to the invocation's end
    assert [type(error) for error in errors] == [TimeoutError]
    assert consumer.polls >= 10 and polls == consumer.polls - 1
