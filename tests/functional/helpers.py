"""Helpers for tests that drive the store directly."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from atf_core.config import StackConfig
from atf_core.definitions import Attr
from atf_core.lifecycle import Assoc
from atf_core.schema import Gate, ScheduleRequest, Task, TaskStatus, to_ms
from atf_core.store import codec
from atf_core.store.gates import gates_item
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import build_task

T0 = datetime(2030, 1, 1, 12, 0, 0).astimezone()


def new_task(store: DynamoTaskStore, config: StackConfig, now: datetime = T0, **request: Any) -> Task:
    body = {"lambda": "work", "payload": {"n": 1}, **request}
    req = ScheduleRequest.model_validate(body)
    result = store.create(build_task(config, req, now), req.fingerprint())
    assert result.created
    return result.task


def force_status(store: DynamoTaskStore, task: Task, status: TaskStatus, attempt: int, now: datetime = T0) -> Task:
    """Write a task straight into a status, with the timestamps that status carries."""
    updated = task.model_copy(
        update={
            "status": status,
            "attempt": attempt,
            "enqueued_at": now,
            "claimed_at": now if attempt else None,
            "heartbeat_at": now if status is TaskStatus.PROCESSING else None,
        }
    )
    shards = store._config.shards_of(task.lambda_)
    partition = codec.index_partition(
        Assoc.NEW, task.lambda_, task.priority, codec.shard_of(task.id, shards, task.flow_key)
    )
    item = codec.task_to_item(updated, "f", partition)
    for attr, moment in ((Attr.ENQUEUED, now), (Attr.CLAIMED, now), (Attr.HEARTBEAT, now)):
        item[attr] = {"N": str(to_ms(moment))}
    if status.terminal:
        del item[Attr.INDEX_PK], item[Attr.INDEX_SK]
    store._table.put(item)
    return updated


def raw_item(store: DynamoTaskStore, task_id: str) -> dict[str, Any]:
    found = store._table.get(task_id)
    assert found is not None
    return codec.from_item(found)


def later(seconds: float, now: datetime = T0) -> datetime:
    return now + timedelta(seconds=seconds)


def gates_written_at_once(dynamodb: Any, config: StackConfig, gates: list[Gate]) -> int:
    """The gates item holding `gates`, as put_gate writes them, in one write: a put reads and rewrites the
    whole item, and putting a hundred or more one by one spends seconds of moto's time per test."""
    item = gates_item({gate.scope: codec.gate_to_plain(gate) for gate in gates})
    dynamodb.put_item(TableName=config.table_name, Item=item)
    return len(gates)
