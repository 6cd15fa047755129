"""The two enqueue modes: how the consumer hands a due task over to its queue.

By default it reads the due tasks (one batch read, at half price) and sends
them without writing: the controller's claim is the task's first write after
scheduling. With `record_enqueued` it writes each task as enqueued first, as
in ATF's table, and reads nothing before: the write returns the task.
"""

from __future__ import annotations

import functools
import itertools
from abc import ABC, abstractmethod
from collections.abc import Iterator

from atf_core.config import StackConfig
from atf_core.consumer.decide import Action, Look, record_and_send, send_unrecorded
from atf_core.consumer.overlap import Overlap
from atf_core.schema import Task
from atf_core.store.base import DueEntry, TaskStore


class EnqueueMode(ABC):
    @abstractmethod
    def paired(self, entries: Iterator[DueEntry], chunk: int) -> Iterator[tuple[DueEntry, Task | None]]:
        """Each entry with its task, as far as this mode reads tasks before it decides."""

    @abstractmethod
    def handover(self, look: Look, config: StackConfig) -> Action:
        """The action for an entry that is neither expired nor dropped (pure)."""


class SendUnrecorded(EnqueueMode):
    def __init__(self, store: TaskStore, overlap: Overlap) -> None:
        self._store = store
        self._overlap = overlap

    def paired(self, entries: Iterator[DueEntry], chunk: int) -> Iterator[tuple[DueEntry, Task | None]]:
        # The next chunk's read is under way while this one is decided and sent.
        batches = iter(lambda: list(itertools.islice(entries, chunk)), [])
        reads = (functools.partial(self._read, batch) for batch in batches)
        for batch, tasks in self._overlap.ordered(reads, ahead=2):
            yield from ((entry, tasks.get(entry.id)) for entry in batch)

    def _read(self, batch: list[DueEntry]) -> tuple[list[DueEntry], dict[str, Task]]:
        return batch, {t.id: t for t in self._store.get_many([e.id for e in batch], consistent=False)}

    def handover(self, look: Look, config: StackConfig) -> Action:
        return send_unrecorded(look, config)


class RecordEnqueued(EnqueueMode):
    def paired(self, entries: Iterator[DueEntry], chunk: int) -> Iterator[tuple[DueEntry, Task | None]]:
        return ((entry, None) for entry in entries)  # the enqueue write returns the task

    def handover(self, look: Look, config: StackConfig) -> Action:
        return record_and_send(look, config)


def enqueue_mode(config: StackConfig, store: TaskStore, overlap: Overlap) -> EnqueueMode:
    return RecordEnqueued() if config.record_enqueued else SendUnrecorded(store, overlap)
