"""Where an index entry stands in the order a partition is read in, for paging: (next_timestamp in ms, id).

The index's sort key is the time alone: entries of one millisecond (tasks rescheduled together, tasks that
died in one consumer pass) come back in no documented order, so a page that ends inside such a run would
skip or repeat entries when the next page starts strictly after it. `in_order` sorts each run by id.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from atf_core.store.base import DueEntry

Position = tuple[int, str]


def position(entry: DueEntry) -> Position:
    return entry.next_ms, entry.id


def in_order(entries: Iterator[DueEntry]) -> Iterator[DueEntry]:
    """The entries (in time order) with each millisecond's run sorted by id, read one run at a time."""
    for _, run in itertools.groupby(entries, key=lambda entry: entry.next_ms):
        yield from sorted(run, key=lambda entry: entry.id)
