"""What a consumer keeps from a read past a flood, and for how long (atf_core.consumer.read_past)."""

from __future__ import annotations

from atf_core.consumer.read_past import SLACK_MS, ReadPastMarks
from atf_core.store.base import DueEntry, ReadPast

PARTITION = "new#work#normal#0"
FLOOD = (frozenset({("default", "A")}), frozenset[str]())
EVERY_MS = 1_000


def behind(count: int) -> list[DueEntry]:
    return [DueEntry(f"b{i}", "work", "default", "normal", 10 + i, flow_key="B") for i in range(count)]


def test_what_a_read_found_is_offered_until_the_next_read_is_due_then_let_go() -> None:
    # Given a read past A's flood at 0 ms that found three of B's entries
    marks = ReadPastMarks(every_ms=EVERY_MS)
    marks.record(PARTITION, FLOOD, 0, None, ReadPast(behind(3), 10))
    # Then the polls before the next read is due are offered them, and not for other skipped flows
    assert marks.found([PARTITION], FLOOD, EVERY_MS - 1) == {PARTITION: tuple(behind(3))}
    assert marks.found([PARTITION], (frozenset({("default", "C")}), frozenset[str]()), 10) == {}
    assert marks.plan([PARTITION], FLOOD, EVERY_MS - 1) == {}
    # And once it is due they are not, and forgetting lets them go while the mark stays
    assert marks.found([PARTITION], FLOOD, EVERY_MS) == {}
    marks.forget_found(EVERY_MS - 1)
    assert marks.found([PARTITION], FLOOD, 0) == {PARTITION: tuple(behind(3))}
    marks.forget_found(EVERY_MS)
    assert marks.found([PARTITION], FLOOD, 0) == {}
    assert marks.plan([PARTITION], FLOOD, EVERY_MS) == {PARTITION: -SLACK_MS}  # the next read starts at the mark
