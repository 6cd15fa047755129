"""A history of what happened, for the fault-injection checker.

Each execution's start and end, and each state write attempted with its
outcome, as JSON lines in ATF_HISTORY_DIR (one file per process). Without
that variable nothing is recorded and the recorder costs nothing.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from atf_core.lifecycle import Transition
from atf_core.schema import Gate, Task
from atf_core.store.base import Change, CreateResult, DueEntry, Outcome, TaskRef, TaskStore

HISTORY_ENV = "ATF_HISTORY_DIR"


class History:
    def __init__(self, directory: Path | None, component: str) -> None:
        self._file = None
        self._lock = threading.Lock()
        self._base = {"component": component, "host": socket.gethostname(), "pid": os.getpid()}
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
            self._file = (directory / f"{component}-{os.getpid()}.jsonl").open("a", buffering=1)

    @property
    def enabled(self) -> bool:
        return self._file is not None

    def record(self, kind: str, **fields: Any) -> None:
        if self._file is None:
            return
        line = json.dumps({"kind": kind, "t": time.time(), **self._base, **fields}, default=str)
        with self._lock:
            self._file.write(line + "\n")

    @classmethod
    def from_env(cls, component: str) -> History:
        directory = os.environ.get(HISTORY_ENV)
        return cls(Path(directory) if directory else None, component)


class RecordingStore(TaskStore):
    """A store that records every transition it attempts and how it ended."""

    def __init__(self, inner: TaskStore, history: History) -> None:
        self._inner = inner
        self._history = history

    def transition(self, task: TaskRef, transition: Transition, change: Change) -> Outcome:
        fields = {"task": task.id, "transition": transition.name, "attempt": change.attempt, "writer": change.writer}
        try:
            outcome = self._inner.transition(task, transition, change)
        except Exception as error:
            self._history.record("write", **fields, result="error", error=type(error).__name__)
            raise
        current = outcome.task
        self._history.record(
            "write",
            **fields,
            result="applied" if outcome.applied else "rejected",
            reconciled=outcome.reconciled,
            status=current.status.value if current else None,
            current_attempt=current.attempt if current else None,
        )
        return outcome

    def create(self, task: Task, fingerprint: str) -> CreateResult:
        result = self._inner.create(task, fingerprint)
        if result.created:
            self._history.record("created", task=task.id, lambda_=task.lambda_)
        return result

    def get(self, task_id: str) -> Task | None:
        return self._inner.get(task_id)

    def get_many(self, task_ids: Sequence[str], consistent: bool = True) -> list[Task]:
        return self._inner.get_many(task_ids, consistent)

    def due(self, partition: str, up_to: datetime, skip_collections: Iterable[str] = ()) -> Iterator[DueEntry]:
        return self._inner.due(partition, up_to, skip_collections)

    def entries(
        self, partition: str, low: datetime, high: datetime, equal: dict[str, str] | None = None
    ) -> Iterator[DueEntry]:
        return self._inner.entries(partition, low, high, equal)

    def gates(self) -> list[Gate]:
        return self._inner.gates()

    def put_gate(self, gate: Gate) -> None:
        self._inner.put_gate(gate)

    def delete_gate(self, lambda_name: str, collection: str | None) -> bool:
        return self._inner.delete_gate(lambda_name, collection)


def recorded(store: TaskStore, history: History) -> TaskStore:
    return RecordingStore(store, history) if history.enabled else store
