"""Translate between Task models and DynamoDB items (short attribute names)."""

from __future__ import annotations

import json
import zlib
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from atf_core.definitions import Attr
from atf_core.lifecycle import Assoc
from atf_core.schema import (
    ANY_COLLECTION,
    Gate,
    GateAction,
    Task,
    TaskError,
    TaskStatus,
    encode_payload,
    from_ms,
    maybe_from_ms,
    to_ms,
)
from atf_core.store.base import DueEntry

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

Item = dict[str, Any]  # in DynamoDB's typed form: {"id": {"S": "..."}}


def shard_of(task_id: str, shards: int, flow_key: str | None = None) -> int:
    """The index shard of a task: its flow key's where it has one, so one key's backlog fills one shard
    and leaves the heads of the others to other keys' tasks (the consumer reads every shard's in turn)."""
    return zlib.crc32((task_id if flow_key is None else f"#{flow_key}").encode()) % shards


def index_partition(assoc: Assoc, lambda_name: str, priority: str, shard: int) -> str:
    return f"{assoc}#{lambda_name}#{priority}#{shard}"


def to_attr(value: Any) -> dict[str, Any]:
    return dict(_serializer.serialize(value))


def from_item(item: Item) -> dict[str, Any]:
    return {key: _plain(_deserializer.deserialize(value)) for key, value in item.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def task_to_item(task: Task, fingerprint: str, index_pk: str | None) -> Item:
    plain: dict[str, Any] = {
        Attr.ID: task.id,
        Attr.LAMBDA: task.lambda_,
        Attr.COLLECTION: task.collection,
        Attr.PRIORITY: task.priority,
        Attr.PAYLOAD: encode_payload(task.payload),
        Attr.STATUS: task.status.value,
        Attr.ATTEMPT: task.attempt,
        Attr.MAX_ATTEMPTS: task.max_attempts,
        Attr.SCHEDULED: to_ms(task.scheduled_at),
        Attr.CREATED: to_ms(task.created_at),
        Attr.FINGERPRINT: fingerprint,
    }
    if index_pk is not None:
        plain[Attr.INDEX_PK] = index_pk
        plain[Attr.INDEX_SK] = to_ms(task.scheduled_at)
    if task.key is not None:
        plain[Attr.KEY] = task.key
    if task.flow_key is not None:
        plain[Attr.FLOW_KEY] = task.flow_key
    if task.expire_at is not None:
        plain[Attr.EXPIRE_AT] = to_ms(task.expire_at)
    if task.chain is not None:
        plain[Attr.CHAIN] = task.chain
    if task.timeout_seconds is not None:
        plain[Attr.TIMEOUT] = Decimal(str(task.timeout_seconds))
    if task.traceparent is not None:
        plain[Attr.TRACEPARENT] = task.traceparent
    return {key: to_attr(value) for key, value in plain.items()}


def item_to_task(item: Item) -> Task:
    raw = from_item(item)
    error = raw.get(Attr.ERROR)
    return Task(
        id=raw[Attr.ID],
        lambda_=raw[Attr.LAMBDA],
        collection=raw[Attr.COLLECTION],
        priority=raw[Attr.PRIORITY],
        payload=json.loads(raw[Attr.PAYLOAD]),
        status=TaskStatus(raw[Attr.STATUS]),
        attempt=raw[Attr.ATTEMPT],
        max_attempts=raw[Attr.MAX_ATTEMPTS],
        scheduled_at=from_ms(raw[Attr.SCHEDULED]),
        created_at=from_ms(raw[Attr.CREATED]),
        enqueued_at=maybe_from_ms(raw.get(Attr.ENQUEUED)),
        claimed_at=maybe_from_ms(raw.get(Attr.CLAIMED)),
        claimed_by=raw.get(Attr.CLAIMED_BY),
        first_claimed_at=maybe_from_ms(raw.get(Attr.FIRST_CLAIMED)),
        heartbeat_at=maybe_from_ms(raw.get(Attr.HEARTBEAT)),
        finished_at=maybe_from_ms(raw.get(Attr.FINISHED)),
        last_error=_error_from_plain(error) if error else None,
        errors=[_error_from_plain(e) for e in raw.get(Attr.ERRORS, [])],
        reason=raw.get(Attr.REASON),
        key=raw.get(Attr.KEY),
        flow_key=raw.get(Attr.FLOW_KEY),
        expire_at=maybe_from_ms(raw.get(Attr.EXPIRE_AT)),
        chain=raw.get(Attr.CHAIN),
        timeout_seconds=raw.get(Attr.TIMEOUT),
        result=json.loads(raw[Attr.RESULT]) if Attr.RESULT in raw else None,
        traceparent=raw.get(Attr.TRACEPARENT),
        next_at=maybe_from_ms(raw.get(Attr.INDEX_SK)),
    )


def due_entry(item: Item) -> DueEntry:
    raw = from_item(item)
    return DueEntry(
        id=raw[Attr.ID],
        lambda_name=raw[Attr.LAMBDA],
        collection=raw[Attr.COLLECTION],
        priority=raw[Attr.PRIORITY],
        next_ms=raw[Attr.INDEX_SK],
        expire_ms=raw.get(Attr.EXPIRE_AT),
        error_type=raw.get(Attr.ERROR_TYPE),
        flow_key=raw.get(Attr.FLOW_KEY),
    )


def error_to_plain(error: TaskError) -> dict[str, Any]:
    # Cut short: an item is billed per KB, and must hold MAX_KEPT_ERRORS + 1 of these, each at most ~2.5 KB
    # (600 characters of up to 4 bytes).
    plain = {"t": error.type[:100], "m": error.message[:300], "a": error.attempt, "at": to_ms(error.at)}
    if error.host:
        plain["h"] = error.host[:200]
    return plain


def error_type_of(plain: dict[str, Any]) -> str | None:
    """The type of an error as error_to_plain keeps it, read without decoding the rest."""
    error_type = plain.get("t")
    return error_type if isinstance(error_type, str) else None


def _error_from_plain(raw: dict[str, Any]) -> TaskError:
    return TaskError(type=raw["t"], message=raw["m"], attempt=raw["a"], at=from_ms(raw["at"]), host=raw.get("h"))


def gate_to_plain(gate: Gate) -> dict[str, Any]:
    plain: dict[str, Any] = {"a": gate.action.value, "r": gate.reason, "t": to_ms(gate.created_at)}
    if gate.until is not None:
        plain["u"] = to_ms(gate.until)
    return plain


def gate_from_plain(scope: str, raw: dict[str, Any]) -> Gate:
    lambda_name, _, collection = scope.partition("/")
    return Gate(
        lambda_=lambda_name,
        collection=None if collection == ANY_COLLECTION else collection,
        action=GateAction(raw["a"]),
        until=maybe_from_ms(raw.get("u")),
        reason=raw.get("r", ""),
        created_at=from_ms(raw["t"]),
    )
