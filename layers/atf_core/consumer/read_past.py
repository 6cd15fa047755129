"""Where a consumer's next read past a flood starts, and when it reads past at all.

A read past a key's backlog (consumer.py, `_fair_due`) is billed for every entry of that backlog it passes
over, up to READ_PAST (store/index.py), some 110 read units, and on the embedded AWS it is most of a poll's
time. A consumer working off a backlog polls again at once, and the backlog changes little from one poll
to the next. So for each index partition it remembers where its last read past found the first entry of
another flow (or, finding none, how far it read), and:

- reads past a partition at most once a poll interval: a task behind a flood waits that much more at most;
- starts the next read there, not at the partition's oldest entry, while the same flows crowd it (and the
  same collections are paused), though never later than SLACK_MS before the poll (a task scheduled to run
  now is written with that moment's timestamp, a little before it lands in the index);
- reads from the oldest entry again every FULL_EVERY_MS, or as soon as other flows crowd it: an entry
  written with an older timestamp than the mark (a time in the past, a late periodic occurrence) is found
  within that;
- keeps what the read found behind the flood for the polls until the next read: a poll sends at most its
  share (enqueue_per_poll), so a key behind the flood with more tasks than its turns in that poll would
  otherwise send the rest a read, a poll interval, apart. The polls after take them from here; those
  already sent, or waiting to be looked at again, the consumer's tracker leaves out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from atf_core.store.base import DueEntry, Flow, ReadPast

SLACK_MS = 2_000
FULL_EVERY_MS = 10_000


# What a read past leaves out: the crowding flows, and the collections paused at the time
Skipped = tuple[frozenset[Flow], frozenset[str]]


@dataclass(frozen=True)
class _Mark:
    skipped: Skipped
    read_ms: int  # when it last read past the partition
    full_ms: int  # when it last read it from its oldest entry
    clear_to_ms: int  # every entry before this sort key was one the read leaves out, when it looked
    found: tuple[DueEntry, ...]  # the entries it found behind them


class ReadPastMarks:
    def __init__(self, every_ms: int) -> None:
        self._every_ms = every_ms
        self._marks: dict[str, _Mark] = {}

    def plan(self, partitions: Sequence[str], skipped: Skipped, now_ms: int) -> dict[str, int | None]:
        """The partitions to read past now, each with the sort key to start from (None: its oldest entry)."""
        planned: dict[str, int | None] = {}
        for partition in partitions:
            mark = self._marks.get(partition)
            if mark is None:
                planned[partition] = None
            elif self._read_due(mark, now_ms):
                same = mark.skipped == skipped and now_ms - mark.full_ms < FULL_EVERY_MS
                planned[partition] = mark.clear_to_ms if same else None
        return planned

    def record(self, partition: str, skipped: Skipped, now_ms: int, since_ms: int | None, read: ReadPast) -> None:
        """A read past `partition` at `now_ms`, from `since_ms`, that found `read`."""
        earlier = self._marks.get(partition)
        full_ms = now_ms if since_ms is None or earlier is None else earlier.full_ms
        clear_to = min(read.clear_to_ms, now_ms - SLACK_MS)
        self._marks[partition] = _Mark(skipped, now_ms, full_ms, clear_to, tuple(read.behind))

    def found(self, partitions: Sequence[str], skipped: Skipped, now_ms: int) -> dict[str, tuple[DueEntry, ...]]:
        """What the last read past each partition found behind the same flows, for those not read now: until
        the next read is due, after which a read tells afresh."""
        marks = ((partition, self._marks.get(partition)) for partition in partitions)
        return {
            partition: mark.found
            for partition, mark in marks
            if mark is not None and mark.found and mark.skipped == skipped and not self._read_due(mark, now_ms)
        }

    def forget_found(self, now_ms: int) -> None:
        """Let go of what reads no longer offered found: a flood that ended leaves no entries held."""
        for partition, mark in list(self._marks.items()):
            if mark.found and self._read_due(mark, now_ms):
                self._marks[partition] = replace(mark, found=())

    def _read_due(self, mark: _Mark, now_ms: int) -> bool:
        """Whether a poll interval has passed since the mark's read: time to read past it again."""
        return now_ms - mark.read_ms >= self._every_ms
