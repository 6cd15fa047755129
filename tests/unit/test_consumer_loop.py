"""The consumer's loop inside one invocation: how long it polls, how far its last poll reads, and a poll that
raises (the gates item unreadable past botocore's retries) is told and the loop polls on."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest

from atf_core.consumer.loop import run_until
from atf_core.consumer.poll import PollReport
from atf_core.consumer.tick import LOOP_MARGIN_S, NEXT_START_S, RUN_S, time_to_poll

INTERVAL = 0.1


class Recording:
    """A consumer whose n-th poll takes takes[n] seconds (the last figure for the rest); it notes when each
    began (monotonic) and how far past the lookahead it read, and raises at the polls named in `fails`."""

    def __init__(self, takes: Sequence[float] = (0.0,), fails: tuple[int, ...] = ()) -> None:
        self.takes, self.fails = list(takes), fails
        self.polls: list[tuple[float, float]] = []

    def poll(self, handover_s: float = 0.0) -> PollReport:
        self.polls.append((time.monotonic(), handover_s))
        time.sleep(self.takes[min(len(self.polls), len(self.takes)) - 1])
        if len(self.polls) in self.fails:
            raise TimeoutError("gates item: read timeout")
        return PollReport()


def test_a_failed_poll_is_told_and_the_invocation_polls_on() -> None:
    # Given an invocation of 0.5 s polling every 20 ms, whose second poll raises
    consumer, errors = Recording(fails=(2,)), []
    ends = time.monotonic() + 0.5
    # When it runs
    polls = run_until(
        consumer,  # type: ignore[arg-type]
        left_s=lambda: ends - time.monotonic(),
        poll_interval=0.02,
        on_error=errors.append,
    )
    # Then the fault was told once, and the polls went on to the invocation's end
    assert [type(error) for error in errors] == [TimeoutError]
    assert len(consumer.polls) >= 10 and polls == len(consumer.polls) - 1


@pytest.mark.parametrize(
    "takes",
    [(0.0,), (0.15,), (0.01,) * 9 + (0.3, 0.01)],  # the tenth starts 0.3 s before the end, and takes 0.3 s
    ids=["quick", "slower-than-the-interval", "one-slower-than-those-before"],
)
def test_an_invocation_stops_at_its_time_and_its_last_poll_reads_to_the_next_invocation(
    takes: Sequence[float],
) -> None:
    for _ in range(3):  # timing: repeated
        # Given an invocation 1.2 s before the end of its RUN_S, with plenty of Lambda time left
        started = time.monotonic() - (RUN_S - 1.2)
        consumer = Recording(takes)
        left = time_to_poll(lambda: 60.0, started)
        stop = started + RUN_S
        # When it runs
        run_until(consumer, left, INTERVAL, next_start_s=NEXT_START_S)  # type: ignore[arg-type]
        # Then it returned about its time, past it only by the last poll's own time
        assert stop - 2 * INTERVAL - 0.45 <= time.monotonic() <= stop + 0.45
        # And only its last poll read past the lookahead: to the next invocation's first poll (or further)
        *before, (last_at, reach) = consumer.polls
        assert before and all(extra == 0.0 for _, extra in before)
        assert last_at + reach >= stop + NEXT_START_S - 0.05


def test_the_last_poll_is_made_though_it_raises_and_is_told() -> None:
    started = time.monotonic() - (RUN_S - 0.5)
    consumer, errors = Recording(fails=tuple(range(1, 100))), []
    run_until(
        consumer, time_to_poll(lambda: 60.0, started), INTERVAL, on_error=errors.append, next_start_s=NEXT_START_S
    )  # type: ignore[arg-type]
    assert consumer.polls[-1][1] > 0 and len(errors) == len(consumer.polls)


def test_an_invocation_that_started_past_its_time_polls_once_reading_to_the_next() -> None:
    consumer = Recording()
    left = time_to_poll(lambda: 60.0, time.monotonic() - RUN_S - 5)
    run_until(consumer, left, INTERVAL, next_start_s=NEXT_START_S)  # type: ignore[arg-type]
    assert [reach for _, reach in consumer.polls] == [NEXT_START_S]


def test_the_lambdas_own_time_bounds_the_polls_with_its_margin() -> None:
    # Given an invocation whose Lambda ends 0.4 s past the margin, long before its RUN_S
    consumer = Recording()
    lambda_ends = time.monotonic() + LOOP_MARGIN_S + 0.4
    left = time_to_poll(lambda: lambda_ends - time.monotonic(), time.monotonic())
    run_until(consumer, left, 0.05)  # type: ignore[arg-type]
    # Then it polled until the margin, reading no further than the lookahead (no next_start_s given)
    assert lambda_ends - time.monotonic() >= LOOP_MARGIN_S - 0.06 and len(consumer.polls) >= 4
    assert {reach for _, reach in consumer.polls} == {0.0}


def test_a_stopped_invocation_polls_no_more() -> None:
    consumer = Recording()
    run_until(consumer, lambda: 30.0, INTERVAL, should_stop=lambda: True, next_start_s=NEXT_START_S)  # type: ignore[arg-type]
    assert consumer.polls == []
