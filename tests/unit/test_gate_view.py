"""Which gate applies to a task, from the gates read at one moment: at that moment, or at a later one (a task's
run time, a claim's) when a gate may have lifted by its until since."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from atf_core.gating import GateView
from atf_core.schema import Gate, GateAction
from tests.builders import NOW

LATER = NOW + timedelta(seconds=2)


def _gate(action: GateAction, collection: str | None = None, until: datetime | None = None) -> Gate:
    return Gate(lambda_="work", collection=collection, action=action, until=until, created_at=NOW)


@pytest.mark.parametrize(
    ("lifts", "applies"),
    [(LATER + timedelta(milliseconds=1), True), (LATER, False), (LATER - timedelta(milliseconds=1), False)],
    ids=["just after", "at that moment", "just before"],
)
def test_a_gate_lifting_by_its_until_applies_to_a_later_moment_only_before_it(lifts: datetime, applies: bool) -> None:
    # Given a drop gate in force when the gates were read, lifting by itself around a task's run time
    view = GateView.of([_gate(GateAction.DROP, until=lifts)], NOW)
    assert view.decide("work", "c") is not None
    # Then it applies at the task's run time only if it has not lifted by then
    assert (view.decide("work", "c", at=LATER) is not None) is applies


def test_a_gate_lifting_before_the_moment_hides_no_other_gate() -> None:
    # Given a collection's drop gate that lifts before the task's run time, and the lambda's, with no end
    lambda_gate = _gate(GateAction.DROP)
    view = GateView.of([_gate(GateAction.DROP, "c", until=LATER - timedelta(seconds=1)), lambda_gate], NOW)
    # Then the collection's applies now (collection over lambda), and the lambda's at the run time
    assert view.decide("work", "c") is not None and view.decide("work", "c").collection == "c"  # type: ignore[union-attr]
    assert view.decide("work", "c", at=LATER) == lambda_gate


def test_a_gate_that_lifted_after_a_task_was_due_still_applies_to_it() -> None:
    # Given gates read a moment after a drop gate lifted by its until (stored still: a put removes it later)
    lifts = NOW - timedelta(milliseconds=300)
    view = GateView.of([_gate(GateAction.DROP, until=lifts)], NOW)
    # Then it is not in force now, but it was at the run time of a task due before it lifted
    assert view.gates == () and view.decide("work", "c") is None
    assert view.decide("work", "c", at=lifts - timedelta(milliseconds=200)) is not None
    assert view.decide("work", "c", at=lifts) is None


def test_only_the_gates_of_the_tasks_lambda_and_collection_apply() -> None:
    # Given gates on two lambdas, one lifted since the read, and a pause on another collection of the lambda
    other = Gate(lambda_="other", action=GateAction.DROP, created_at=NOW)
    lifted_other = Gate(lambda_="other", action=GateAction.DROP, until=NOW - timedelta(seconds=1), created_at=NOW)
    pause_c = _gate(GateAction.PAUSE, "c")
    view = GateView.of([other, lifted_other, pause_c, _gate(GateAction.PAUSE, "d")], NOW)
    # Then a task of the lambda is judged by its own collection's gate, whichever lambda's gates were read first
    assert view.decide("work", "c") == pause_c
    assert view.decide("work", "e") is None
    assert view.decide("other", "c", at=NOW - timedelta(seconds=2)) in (other, lifted_other)
    assert view.decide("absent", "c") is None
