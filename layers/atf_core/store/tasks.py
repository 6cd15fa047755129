"""The task store on DynamoDB: one table, one sparse index, conditional writes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from atf_core.calls import calls
from atf_core.config import StackConfig
from atf_core.definitions import Attr
from atf_core.lifecycle import Assoc, Transition
from atf_core.schema import Gate, Task, TaskStatus, gate_scope, same_request
from atf_core.store import codec, gates, holders, merges
from atf_core.store.base import (
    Change,
    CreateResult,
    DueEntry,
    Flow,
    MergeRecord,
    Outcome,
    ReadPast,
    TaskRef,
    TaskStore,
)
from atf_core.store.codec import Item
from atf_core.store.index import IndexStore
from atf_core.store.table import Table, put_request
from atf_core.store.update import TransitionUpdate

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class DynamoTaskStore(TaskStore):
    def __init__(self, client: DynamoDBClient, config: StackConfig) -> None:
        self._config = config
        self._table = Table(client, config.table_name)
        self._index = IndexStore(client, config.table_name, config.page_size)

    # -- tasks ---------------------------------------------------------------
    @calls("dynamodb:PutItem")
    def create(self, task: Task, fingerprint: str) -> CreateResult:
        written = self._table.put_as(create_request(self._config, task, fingerprint))
        if written.applied:
            return CreateResult(task=task, created=True)
        return create_refused(task.id, written.item, fingerprint)

    @calls("dynamodb:GetItem")
    def get(self, task_id: str) -> Task | None:
        found = self._table.get(task_id)
        return codec.item_to_task(found) if found and Attr.STATUS in found else None

    @calls("dynamodb:GetItem")
    def key_holder(self, lambda_name: str, flow_key: str) -> str | None:
        return holders.read_holder(self._table, lambda_name, flow_key)

    @calls("dynamodb:PutItem", "dynamodb:UpdateItem")
    def create_holding(
        self, task: Task, fingerprint: str, held_by: str | None, cancel: Task | None
    ) -> CreateResult | None:
        create = create_request(self._config, task, fingerprint)
        reasons = holders.take_key(self._table, self._config, create, task, held_by, cancel)
        if reasons is None:
            return CreateResult(task=task, created=True, replaced=cancel.id if cancel else None)
        if reasons and reasons[0].get("Code") == holders.CONDITION_FAILED:  # the task's own create: its id is taken
            return create_refused(task.id, reasons[0].get("Item"), fingerprint)
        return None

    @calls("dynamodb:GetItem")
    def merge_record(self, record_id: str) -> MergeRecord | None:
        return merges.read_record(self._table, record_id)

    @calls("dynamodb:PutItem", "dynamodb:UpdateItem")
    def merge(self, task: TaskRef, transition: Transition, change: Change, record: MergeRecord) -> bool:
        return merges.merge(self._table, self._config, task, transition, change, record)

    @calls("dynamodb:PutItem", "dynamodb:UpdateItem")
    def redrive_holding(self, task: TaskRef, change: Change, held_by: str | None) -> bool | None:
        reasons = holders.redrive_as_holder(self._table, self._config, task, change, held_by)
        if reasons is None:
            return True
        if reasons and reasons[0].get("Code") == holders.CONDITION_FAILED:  # no longer a dead letter
            return False
        return None

    @calls("dynamodb:BatchGetItem")
    def get_many(self, task_ids: Sequence[str], consistent: bool = True) -> list[Task]:
        return [codec.item_to_task(item) for item in self._table.batch_get(task_ids, consistent)]

    @calls("dynamodb:UpdateItem")
    def transition(self, task: TaskRef, transition: Transition, change: Change) -> Outcome:
        update = TransitionUpdate(self._config, task, transition, change).build()
        written = self._table.update(
            task.id, update.expression, update.condition, update.names, update.values, new=True, old_on_refusal=True
        )
        if not written.applied:
            return _rejected(written.item, transition, change)
        if written.item is None:
            raise RuntimeError(f"{transition.name} of {task.id} applied, but UpdateItem returned no item")
        return Outcome(applied=True, task=codec.item_to_task(written.item))

    @calls(IndexStore.due)
    def due(
        self, partition: str, up_to: datetime, skip_collections: Iterable[str] = (), first_page: int | None = None
    ) -> Iterator[DueEntry]:
        return self._index.due(partition, up_to, skip_collections, first_page)

    @calls(IndexStore.read_past)
    def read_past(
        self,
        partition: str,
        up_to: datetime,
        flows: Iterable[Flow],
        skip_collections: Iterable[str] = (),
        since_ms: int | None = None,
        limit: int = 100,
    ) -> ReadPast:
        return self._index.read_past(partition, up_to, flows, skip_collections, since_ms, limit)

    @calls(IndexStore.entries)
    def entries(
        self, partition: str, low: datetime, high: datetime, equal: dict[str, str] | None = None
    ) -> Iterator[DueEntry]:
        return self._index.entries(partition, low, high, equal)

    # -- gates: one item, a map of scope -> gate (atf_core.store.gates) ---------
    @calls("dynamodb:GetItem")
    def gates(self) -> list[Gate]:
        return gates.stored_gates(self._table)

    @calls("dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:PutItem")
    def put_gate(self, gate: Gate) -> None:
        gates.put_gate(self._table, gate)

    @calls("dynamodb:UpdateItem")
    def delete_gate(self, lambda_name: str, collection: str | None) -> bool:
        return gates.delete_gate(self._table, gate_scope(lambda_name, collection))


# What IAM checks for the entry that creates a task inside a TransactWriteItems (authorized item by item).
CREATE_ACTIONS = ("dynamodb:PutItem",)


def create_request(config: StackConfig, task: Task, fingerprint: str) -> dict[str, Any]:
    """The conditional PutItem that creates a task, in its index partition (a shard of its lambda and priority).

    It writes only where no item has the task's id: an idempotency key's task has a fixed id
    (atf_core.tasks.task_id_for), and its item, holding the request's fingerprint, is the key's record. A
    refusal returns the item in the way (`create_refused` reads it). `DynamoTaskStore.create` sends it alone;
    atf_sdk.transaction hands it out as a TransactWriteItems entry.
    """
    shard = codec.shard_of(task.id, config.shards_of(task.lambda_), task.flow_key)
    partition: str | None = codec.index_partition(Assoc.NEW, task.lambda_, task.priority, shard)
    if task.status is TaskStatus.WAITING:
        partition = None  # a chain link enters the index when its parents succeed
    item = codec.task_to_item(task, fingerprint, partition)
    names = {"#id": Attr.ID}
    return put_request(config.table_name, item, "attribute_not_exists(#id)", names, old_on_refusal=True)


def create_refused(task_id: str, existing: Item | None, fingerprint: str) -> CreateResult:
    """A refused create: the task that already had the id, and whether it was asked for by another request."""
    if existing is None:
        raise RuntimeError(f"creating task {task_id} was refused, but DynamoDB returned no item in its way")
    stored = codec.from_item(existing)
    same = same_request(stored.get(Attr.FINGERPRINT, ""), fingerprint)
    replaced = stored.get(Attr.REPLACED) if same else None
    return CreateResult(task=codec.item_to_task(existing), created=False, conflict=not same, replaced=replaced)


def _rejected(old: Item | None, transition: Transition, change: Change) -> Outcome:
    """A refused transition, unless the item shows our own write (a retry after a lost response)."""
    if old is None or Attr.STATUS not in old:
        return Outcome(applied=False, task=None)
    task = codec.item_to_task(old)
    ours = codec.from_item(old).get(Attr.WRITER) == change.writer
    if ours and task.status is transition.target:
        return Outcome(applied=True, task=task, reconciled=True)
    return Outcome(applied=False, task=task)
