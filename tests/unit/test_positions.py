"""Index entries of one millisecond, as a partition may return them in any order, are read in id order:
paging strictly after (time, id) would otherwise skip or repeat some."""

from __future__ import annotations

from atf_core.store.base import DueEntry
from atf_core.store.positions import in_order, position


def entry(next_ms: int, task_id: str) -> DueEntry:
    return DueEntry(id=task_id, lambda_name="work", priority="normal", next_ms=next_ms, collection="default")


def test_each_millisecond_is_read_in_id_order_and_the_times_stay_in_order() -> None:
    given = [entry(5, "c"), entry(5, "a"), entry(5, "b"), entry(7, "z"), entry(9, "b"), entry(9, "a")]
    assert [position(e) for e in in_order(iter(given))] == [(5, "a"), (5, "b"), (5, "c"), (7, "z"), (9, "a"), (9, "b")]


def test_it_reads_no_further_than_the_millisecond_it_is_in() -> None:
    read: list[str] = []

    def entries() -> object:
        for e in (entry(5, "b"), entry(5, "a"), entry(6, "c"), entry(7, "d")):
            read.append(e.id)
            yield e

    ordered = in_order(entries())  # type: ignore[arg-type]
    assert [next(ordered).id, next(ordered).id] == ["a", "b"] and read == ["b", "a", "c"]
