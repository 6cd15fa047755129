"""What `atf dead-letters redrive` says when more are dead than its limit: call again, or, when none of the
ones it reached could be redriven (their singleton keys held), how to go on past them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from atf_core.deadletters import BulkResult, DeadLetter
from atf_sdk.commands.dead_letters import _summary, stepping_until

DIED = datetime(2027, 1, 1, tzinfo=UTC)


def letter(n: int) -> DeadLetter:
    return DeadLetter(f"{n:032x}", "work", "default", "normal", "Fatal", DIED, flow_key=f"k{n}")


UTC_CALL = datetime(2027, 1, 2, tzinfo=UTC)
EARLIER, LATER = datetime(2027, 1, 1, tzinfo=UTC), datetime(2030, 1, 1, tzinfo=UTC)
UNTIL = datetime(2027, 1, 2, 3, 4, 5, 678999, tzinfo=UTC)
BY = "--until 2027-01-02T03:04:05.678Z"  # to the millisecond, cut (not rounded) as the API keeps it


@pytest.mark.parametrize(
    ("changed", "dry_run", "until", "says"),
    [
        (2, False, None, "more of the selection are dead than --limit: redrive again for the rest"),
        (1, False, None, "redrive again for the rest (--after 1-NEXT skips the 1 left dead)"),
        (0, True, None, "more of the selection are dead than --limit: the next ones, --after 1-NEXT"),
        (0, False, None, "none of these could be redriven: redrive with --after 1-NEXT to go on past them"),
        # A redrive's letters may die again after it, past its next: the rest are those dead by its first call
        (2, False, UNTIL, f"the rest, redrive with --after 1-NEXT {BY}"),
        (1, False, UNTIL, f"redrive with --after 1-NEXT {BY} (it skips the 1 left dead)"),
        (0, True, UNTIL, f"the next ones, --after 1-NEXT {BY}"),
        (0, False, UNTIL, f"redrive with --after 1-NEXT {BY} to go on past them"),
    ],
)
def test_more_says_whether_calling_again_gets_further(
    changed: int, dry_run: bool, until: datetime | None, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    busy = [letter(n).id for n in range(2 - changed)]
    done = BulkResult(dry_run, [letter(0), letter(1)], changed, key_busy=busy, more=True, next="1-NEXT")
    _summary(done, "redrive", "redriven", until=until)
    assert says in capsys.readouterr().out.replace("\n", " ")


@pytest.mark.parametrize(
    ("given", "called_at", "bound"),
    [(None, UTC_CALL, UTC_CALL), (EARLIER, UTC_CALL, EARLIER), (LATER, UTC_CALL, UTC_CALL), (EARLIER, None, EARLIER)],
    ids=["the call's time", "an earlier --until", "a later --until", "no call time"],
)
def test_going_on_is_bounded_by_the_call_or_an_earlier_until(
    given: datetime | None, called_at: datetime | None, bound: datetime
) -> None:
    # A --until later than the call would let letters that die again after it back into the rest
    assert stepping_until(given, called_at) == bound
