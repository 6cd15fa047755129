"""What this consumer already knows is in flight, so it does not write again.

Enqueue and claim leave a task's index entry where it was (that saves two
index writes each), so an in-flight task stays "due" in the index until its
first heartbeat. The tracker remembers when each such task next needs a look;
a consumer that starts empty relearns the same from one conditional write per
entry, so the memory is an optimisation, never the source of truth.
"""

from __future__ import annotations

EntryKey = tuple[str, int]  # (task id, next_timestamp): an entry that moved is news
QueueKey = tuple[str, str]  # (lambda, priority)


class InFlightTracker:
    def __init__(self) -> None:
        self._wake_ms: dict[EntryKey, tuple[int, QueueKey]] = {}

    def wait(self, entry: EntryKey, until_ms: int, queue: QueueKey) -> None:
        self._wake_ms[entry] = (until_ms, queue)

    def waiting(self, entry: EntryKey, now_ms: int) -> bool:
        found = self._wake_ms.get(entry)
        return found is not None and now_ms < found[0]

    def prune(self, seen: set[EntryKey], read_in_full: set[QueueKey]) -> None:
        """Drop entries that a complete read of their queue's partitions no longer found due."""
        gone = [e for e, (_, queue) in self._wake_ms.items() if queue in read_in_full and e not in seen]
        for entry in gone:
            del self._wake_ms[entry]

    def __len__(self) -> int:
        return len(self._wake_ms)
