"""What `atf dead-letters redrive` and `discard` say when more are dead than their limit: how to go on past the
letters a call reached (--after) through the letters dead by its first call (--until, the result's)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from atf_core.deadletters import BulkResult, DeadLetter
from atf_sdk.commands.dead_letters import _summary

DIED = datetime(2027, 1, 1, tzinfo=UTC)


def letter(n: int) -> DeadLetter:
    return DeadLetter(f"{n:032x}", "work", "default", "normal", "Fatal", DIED, flow_key=f"k{n}")


UNTIL = datetime(2027, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
BY = "--until 2027-01-02T03:04:05.678Z"


@pytest.mark.parametrize(
    ("changed", "dry_run", "says"),
    [
        (2, False, f"more of the selection are dead than --limit: the rest, redrive with --after 1-NEXT {BY}"),
        (1, False, f"the rest, redrive with --after 1-NEXT {BY} (it skips the 1 left dead)"),
        (0, True, f"more of the selection are dead than --limit: the next ones, --after 1-NEXT {BY}"),
        (0, False, f"none of these could be redriven: redrive with --after 1-NEXT {BY} to go on past them"),
    ],
)
def test_more_says_how_to_go_on_through_the_letters_dead_by_the_call(
    changed: int, dry_run: bool, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    busy = [letter(n).id for n in range(2 - changed)]
    done = BulkResult(dry_run, [letter(0), letter(1)], changed, key_busy=busy, more=True, next="1-NEXT", until=UNTIL)
    _summary(done, "redrive", "redriven")
    assert says in capsys.readouterr().out.replace("\n", " ")


def test_a_discard_goes_on_alike(capsys: pytest.CaptureFixture[str]) -> None:
    done = BulkResult(False, [letter(0), letter(1)], 2, more=True, next="1-NEXT", until=UNTIL)
    _summary(done, "discard", "discarded (now fatal_failure)")
    assert f"the rest, discard with --after 1-NEXT {BY}" in capsys.readouterr().out.replace("\n", " ")


@pytest.mark.parametrize(("went_on", "says_so"), [(True, True), (False, False)])
def test_a_call_that_went_on_says_when_it_reached_the_last_of_the_selection(
    went_on: bool, says_so: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    done = BulkResult(False, [letter(0)], 1, more=False, until=UNTIL)
    _summary(done, "redrive", "redriven", went_on=went_on)
    said = capsys.readouterr().out.replace("\n", " ")
    assert ("the last of the selection: no more are dead past --after" in said) is says_so
    assert "--after 1-NEXT" not in said
