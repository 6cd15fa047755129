"""The consumer's loop inside one invocation: how long it polls, how far its last poll reads, and a poll that
raises (the gates item unreadable past botocore's retries) is told and the loop polls on."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from atf_core.consumer.loop import run_until
from atf_core.consumer.poll import PollReport
from atf_core.consumer.tick import END_BEFORE_TICK_S, LOOP_MARGIN_S, NEXT_START_S, TICK_S, tick_of, time_to_poll


class Recording:
    """A consumer whose polls take `takes` seconds; it notes when each began and how far past the lookahead it
    read, and raises at the polls named in `fails`."""

    def __init__(self, takes: float = 0.0, fails: tuple[int, ...] = ()) -> None:
        self.takes, self.fails = takes, fails
        self.polls: list[tuple[float, float]] = []

    def poll(self, handover_s: float = 0.0) -> PollReport:
        self.polls.append((time.time(), handover_s))
        time.sleep(self.takes)
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


@pytest.mark.parametrize("takes", [0.0, 0.15])
def test_an_invocation_told_its_tick_stops_before_the_next_and_its_last_poll_covers_the_hand_over(
    takes: float,
) -> None:
    for _ in range(3):  # timing: repeated
        # Given an invocation whose tick fired 58.5 s ago, with a minute of its Lambda time left, polling every
        # 0.1 s (polls that take no time, or longer than the interval)
        consumer, tick = Recording(takes), datetime.now(UTC) - timedelta(seconds=TICK_S - 1.5)
        lambda_ends = time.monotonic() + 60
        left = time_to_poll(lambda ends=lambda_ends: ends - time.monotonic(), tick)
        # When it runs
        run_until(consumer, left, poll_interval=0.1, next_start_s=NEXT_START_S)  # type: ignore[arg-type]
        # Then it returned before the next tick, END_BEFORE_TICK_S ahead of it (not at its Lambda's end)
        next_tick = tick.timestamp() + TICK_S
        stop = next_tick - END_BEFORE_TICK_S
        assert stop - 0.1 - 0.05 <= time.time() < stop + takes + 0.05  # within a poll interval of it
        # And only its last poll read past the lookahead: from its start to the next invocation's first poll
        *before, (last_at, last_reach) = consumer.polls
        assert before and all(reach == 0.0 for _, reach in before)
        assert last_at + last_reach >= next_tick - END_BEFORE_TICK_S + NEXT_START_S - 0.05


def test_an_invocation_whose_tick_came_late_polls_once_covering_the_hand_over() -> None:
    # Given an invocation started after the time its tick left it to poll
    consumer, tick = Recording(), datetime.now(UTC) - timedelta(seconds=TICK_S)
    left = time_to_poll(lambda: 60.0, tick)
    # When it runs, then it polls once, reading to the next invocation's first poll
    run_until(consumer, left, poll_interval=0.1, next_start_s=NEXT_START_S)  # type: ignore[arg-type]
    assert [reach for _, reach in consumer.polls] == [NEXT_START_S]


def test_an_invocation_not_told_its_tick_polls_to_its_lambdas_margin_and_reads_no_further() -> None:
    consumer = Recording()
    lambda_ends = time.monotonic() + LOOP_MARGIN_S + 0.4
    run_until(consumer, time_to_poll(lambda: lambda_ends - time.monotonic(), None), poll_interval=0.05)  # type: ignore[arg-type]
    assert lambda_ends - time.monotonic() >= LOOP_MARGIN_S - 0.01 and len(consumer.polls) >= 4
    assert {reach for _, reach in consumer.polls} == {0.0}


@pytest.mark.parametrize(
    ("event", "tick"),
    [
        ({"tick": "2026-11-29T01:40:00Z"}, datetime(2026, 11, 29, 1, 40, tzinfo=UTC)),
        ({"group": {"index": 0, "of": 1}}, None),  # invoked by hand
        ({"tick": "yesterday"}, None),
        ({"tick": "2026-11-29T01:40:00"}, None),  # no zone: not a time EventBridge writes
        ({"tick": 1764380400}, None),
    ],
)
def test_the_tick_is_read_from_the_invocations_input(event: dict[str, object], tick: datetime | None) -> None:
    assert tick_of(event) == tick
