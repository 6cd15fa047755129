"""The task store's contract. DynamoDB is the backend; tests may add others."""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from atf_core.lifecycle import Transition
from atf_core.schema import Gate, Task, TaskError, TaskStatus

# A fairness flow: a collection and a flow key (None for tasks without one).
Flow = tuple[str, str | None]


@dataclass(frozen=True)
class DueEntry:
    """One index entry the consumer found due."""

    id: str
    lambda_name: str
    collection: str
    priority: str
    next_ms: int
    expire_ms: int | None = None
    error_type: str | None = None
    flow_key: str | None = None

    @property
    def flow(self) -> Flow:
        """What fairness takes turns between: its collection and its flow key."""
        return (self.collection, self.flow_key)


@dataclass(frozen=True)
class ReadPast:
    """What a read past some flows' backlog found: the other entries behind it, oldest first, and the sort
    key (next_timestamp, ms) before which every entry it passed over was one of those flows'."""

    behind: list[DueEntry]
    clear_to_ms: int


@dataclass(frozen=True)
class CreateResult:
    task: Task
    created: bool
    conflict: bool = False  # same idempotency key, different request
    replaced: str | None = None  # the task it replaced as its singleton flow key's holder (cancelled)
    debounced: bool = False  # merged into its debounced flow key's waiting task (`task`), which runs instead


@dataclass(frozen=True)
class MergeRecord:
    """A debounced request with an idempotency key, merged into another task: the key's record (an item at the
    id the key names), so that a repeat of the request answers with the task it was merged into."""

    id: str
    fingerprint: str
    task_id: str


@dataclass
class Change:
    """What one transition writes besides the status.

    `writer` identifies this logical write across botocore's retries: when a
    write succeeded but its response was lost, the retry fails its condition,
    finds its own token on the item and reports success instead of failure.
    """

    now: datetime
    attempt: int | None = None
    next_at: datetime | None = None
    error: TaskError | None = None
    reason: str | None = None
    due_by: datetime | None = None
    expired_by: datetime | None = None  # EXPIRE: only if expire_at has passed by then
    max_attempts: int | None = None  # REDRIVE: a fresh budget of attempts on top of those used
    observed: dict[str, int] = field(default_factory=dict)
    # A stuck task's re-enqueue or end: the status it was seen in. A first heartbeat moves a claimed task to
    # processing and leaves its claim stamp as it was: the stamp alone would not show it alive.
    seen_status: TaskStatus | None = None
    # CLAIM of a task the consumer sent without writing: the index timestamp it was sent for.
    # An entry that has moved later since (a retry's backoff) is not due: the claim fails.
    entry_ms: int | None = None
    # AMEND: the new priority (the entry moves to its partition), payload (encoded JSON) and scheduled time.
    priority: str | None = None
    payload: str | None = None
    scheduled_at: datetime | None = None
    host: str | None = None  # CLAIM: the executor (host:pid) the task is claimed for
    result: str | None = None  # SUCCEED: what the callback returned, as compact JSON
    writer: str = field(default_factory=lambda: uuid.uuid4().hex[:12])


@dataclass(frozen=True)
class Outcome:
    """The result of a transition: applied (or reconciled) with the new task,
    or rejected with the task as it stood."""

    applied: bool
    task: Task | None
    reconciled: bool = False


class TaskStore(ABC):
    @abstractmethod
    def create(self, task: Task, fingerprint: str) -> CreateResult: ...

    @abstractmethod
    def get(self, task_id: str) -> Task | None: ...

    @abstractmethod
    def key_holder(self, lambda_name: str, flow_key: str) -> str | None:
        """The id of the task that last took this singleton flow key (it holds it while not settled)."""

    @abstractmethod
    def create_holding(
        self, task: Task, fingerprint: str, held_by: str | None, cancel: Task | None
    ) -> CreateResult | None:
        """Create the task as its flow key's holder, where the key is still held by `held_by` (None: by nobody),
        cancelling `cancel` (the holder it replaces) in the same transaction. None: the key or that task
        changed meanwhile, nothing written; a refused result: the task's id (idempotency key) was taken."""

    @abstractmethod
    def merge_record(self, record_id: str) -> MergeRecord | None:
        """The record of a request merged into another task by debounce, if that is what the id names."""

    @abstractmethod
    def merge(self, task: TaskRef, transition: Transition, change: Change, record: MergeRecord) -> bool:
        """Apply the transition (fenced as it says) and write the record where no item has its id, in one
        transaction; False when either condition failed (nothing written)."""

    @abstractmethod
    def redrive_holding(self, task: TaskRef, change: Change, held_by: str | None) -> bool | None:
        """Redrive a dead letter (its TaskRef with its flow key) as that singleton key's holder again, where the
        key is still held by `held_by` (a settled task, the task itself, or None: nobody). True when redriven,
        False when the task is no longer a dead letter, None when the key changed hands meanwhile: nothing
        written either way but True."""

    @abstractmethod
    def get_many(self, task_ids: Sequence[str], consistent: bool = True) -> list[Task]:
        """The tasks that exist, in no particular order; `consistent=False` reads at half price
        and may return a state up to about a second old."""

    @abstractmethod
    def transition(self, task: TaskRef, transition: Transition, change: Change) -> Outcome: ...

    @abstractmethod
    def due(
        self, partition: str, up_to: datetime, skip_collections: Iterable[str] = (), first_page: int | None = None
    ) -> Iterator[DueEntry]:
        """Due entries, oldest first, but for those of the collections to skip. `first_page`: how many entries
        the first read asks for, where a reader expects to want only a few (each next read asks for twice as
        many, up to the store's page size); none: a whole page at once."""

    @abstractmethod
    def read_past(
        self,
        partition: str,
        up_to: datetime,
        flows: Iterable[Flow],
        skip_collections: Iterable[str] = (),
        since_ms: int | None = None,
        limit: int = 100,
    ) -> ReadPast:
        """Up to `limit` due entries that are not of `flows` (nor of the collections to skip), oldest first,
        from `since_ms` on; a read bounded in the flows' entries it passes over (DynamoDB bills them)."""

    @abstractmethod
    def entries(
        self, partition: str, low: datetime, high: datetime, equal: dict[str, str] | None = None
    ) -> Iterator[DueEntry]:
        """Index entries of one partition with low <= next_timestamp <= high, optionally
        only those whose projected attributes equal the given values."""

    @abstractmethod
    def gates(self) -> list[Gate]: ...

    @abstractmethod
    def put_gate(self, gate: Gate) -> None: ...

    @abstractmethod
    def delete_gate(self, lambda_name: str, collection: str | None) -> bool: ...


@dataclass(frozen=True)
class TaskRef:
    """Enough of a task to address it and its index partition."""

    id: str
    lambda_name: str
    priority: str
    flow_key: str | None = None  # a keyed task's entry is in its key's shard (codec.shard_of)

    @classmethod
    def of(cls, task: Task) -> TaskRef:
        return cls(task.id, task.lambda_, task.priority, task.flow_key)
