"""What this consumer already knows is in flight, so it does not send or write again.

Sends and claims leave a task's index entry where it was (that saves two
index writes each), so a sent or running task stays "due" in the index until
its first heartbeat. The tracker remembers when each such task next needs a
look, and when it sent each task it did not record as enqueued; a consumer
that starts empty relearns the state from the items (and sends waiting tasks
once more), so the memory is an optimisation, never the source of truth.
"""

from __future__ import annotations

from atf_core.store.base import DueEntry

EntryKey = tuple[str, int]  # (task id, next_timestamp): an entry that moved is news
QueueKey = tuple[str, str]  # (lambda, priority)
Where = tuple[str, str, str]  # (lambda, priority, collection)


def where(entry: DueEntry) -> Where:
    return (entry.lambda_name, entry.priority, entry.collection)


class InFlightTracker:
    def __init__(self) -> None:
        self._wake_ms: dict[EntryKey, tuple[int, Where]] = {}
        self._sent_ms: dict[EntryKey, tuple[int, Where]] = {}  # sends not recorded in the store

    def sent(self, entry: EntryKey, at_ms: int, queue: Where) -> None:
        self._sent_ms[entry] = (at_ms, queue)

    def sent_at(self, entry: EntryKey) -> int | None:
        found = self._sent_ms.get(entry)
        return None if found is None else found[0]

    def forget_sends_before(self, ms: int) -> None:
        for entry in [e for e, (at, _) in self._sent_ms.items() if at < ms]:
            del self._sent_ms[entry]

    def forget_gated(self, scopes: set[tuple[str, str | None]]) -> None:
        """Gates on these (lambda, collection or None for all) lifted: what controllers handed back
        under them is waiting again."""
        for table in (self._wake_ms, self._sent_ms):
            gone = [
                e for e, (_, (name, _p, collection)) in table.items() if {(name, None), (name, collection)} & scopes
            ]
            for entry in gone:
                del table[entry]

    def wait(self, entry: EntryKey, until_ms: int, queue: Where) -> None:
        self._wake_ms[entry] = (until_ms, queue)

    def waiting(self, entry: EntryKey, now_ms: int) -> bool:
        found = self._wake_ms.get(entry)
        return found is not None and now_ms < found[0]

    def prune(self, seen: set[EntryKey], read_in_full: set[QueueKey]) -> None:
        """Drop entries that a complete read of their queue's partitions no longer found due."""
        gone = [e for e, (_, queue) in self._wake_ms.items() if queue[:2] in read_in_full and e not in seen]
        for entry in gone:
            del self._wake_ms[entry]
