"""What `atf dead-letters redrive` says when more are dead than its limit: call again, or, when none of the
ones it reached could be redriven (their singleton keys held), how to go on past them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from atf_core.deadletters import BulkResult, DeadLetter
from atf_sdk.commands.dead_letters import _summary

DIED = datetime(2027, 1, 1, tzinfo=UTC)


def letter(n: int) -> DeadLetter:
    return DeadLetter(f"{n:032x}", "work", "default", "normal", "Fatal", DIED, flow_key=f"k{n}")


@pytest.mark.parametrize(
    ("changed", "dry_run", "says"),
    [
        (2, False, "more of the selection are dead than --limit: redrive again for the rest"),
        (1, False, "redrive again for the rest (--after 1-NEXT skips the 1 left dead)"),
        (0, True, "more of the selection are dead than --limit: the next ones, --after 1-NEXT"),
        (0, False, "none of these could be redriven: redrive with --after 1-NEXT to go on past them"),
    ],
)
def test_more_says_whether_calling_again_gets_further(
    changed: int, dry_run: bool, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    busy = [letter(n).id for n in range(2 - changed)]
    done = BulkResult(dry_run, [letter(0), letter(1)], changed, key_busy=busy, more=True, next="1-NEXT")
    _summary(done, "redrive", "redriven")
    assert says in capsys.readouterr().out.replace("\n", " ")


UNTIL = datetime(2027, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


@pytest.mark.parametrize(
    ("changed", "dry_run", "says"),
    [
        (2, False, "the rest, redrive with --after 1-NEXT --until 2027-01-02T03:04:05.678Z"),
        (1, False, "redrive with --after 1-NEXT --until 2027-01-02T03:04:05.678Z (it skips the 1 left dead)"),
        (0, True, "the next ones, --after 1-NEXT --until 2027-01-02T03:04:05.678Z"),
        (0, False, "redrive with --after 1-NEXT --until 2027-01-02T03:04:05.678Z to go on past them"),
    ],
)
def test_a_redrive_goes_on_through_the_letters_dead_by_its_first_call(
    changed: int, dry_run: bool, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a redrive that reached part of its selection at UNTIL: the letters it redrove may die again after it,
    # with a time of death past its next, and a call again from the oldest would take them again
    busy = [letter(n).id for n in range(2 - changed)]
    done = BulkResult(dry_run, [letter(0), letter(1)], changed, key_busy=busy, more=True, next="1-NEXT")
    _summary(done, "redrive", "redriven", until=UNTIL)
    # Then the way on names where it stopped and the time that bounds the rest, to the millisecond
    assert says in capsys.readouterr().out.replace("\n", " ")
