"""What this consumer already knows is in flight, so it does not write again.

Enqueue and claim leave a task's index entry where it was (that saves two
index writes each), so an in-flight task stays "due" in the index until its
first heartbeat. The tracker remembers when each such task next needs a look;
a consumer that starts empty relearns the same from one conditional write per
entry, so the memory is an optimisation, never the source of truth.
"""

from __future__ import annotations


EntryKey = tuple[str, int]  # (task id, next_timestamp): an entry that moved is news


class InFlightTracker:
    def __init__(self) -> None:
        self._wake_ms: dict[EntryKey, int] = {}

    def wait(self, entry: EntryKey, until_ms: int) -> None:
        self._wake_ms[entry] = until_ms

    def waiting(self, entry: EntryKey, now_ms: int) -> bool:
        wake = self._wake_ms.get(entry)
        return wake is not None and now_ms < wake

    def prune(self, seen: set[EntryKey]) -> None:
        """Drop entries the last poll no longer found due (finished or moved on)."""
        for entry in [e for e in self._wake_ms if e not in seen]:
            del self._wake_ms[entry]

    def __len__(self) -> int:
        return len(self._wake_ms)
