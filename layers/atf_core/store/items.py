"""Schedules and chains live in the task table too, as items of their own.

A schedule item is indexed in one partition of the scheduling index, keyed
by its next occurrence, so the consumer finds due schedules with the same
kind of query it uses for tasks; a paused schedule is parked far in the
future. A chain item lists its links and is indexed while the chain runs,
so the consumer can make sure no finished link leaves its children waiting.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from atf_core.calls import calls
from atf_core.definitions import Attr
from atf_core.recurrence import Schedule, ScheduleSpec
from atf_core.schema import STORED, from_ms, maybe_from_ms, to_ms
from atf_core.store import codec
from atf_core.store.index import IndexStore
from atf_core.store.table import Table

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

SCHEDULES_PARTITION = "cron"
CHAINS_PARTITION = "chains"
PARKED_MS = 253402300799000  # 9999-12-31: a paused schedule is never due


class ItemStore:
    """Plain items (schedules, chains) in the task table, written with optimistic versions."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._table = Table(client, table)
        self._index = IndexStore(client, table)

    @calls("dynamodb:PutItem")
    def put(
        self,
        item_id: str,
        fields: dict[str, Any],
        index: tuple[str, int] | None,
        version: int | None,
        holding: dict[str, Any] | None = None,
    ) -> bool:
        """Write an item if its version is still `version` (None: only if it does not exist) and, for a
        replacement, it still holds each of `holding`'s fields with that value: decided in the write itself,
        so an item deleted and made again meanwhile (its version restarted) is not taken for the one read."""
        plain = {Attr.ID: item_id, "v": (version or 0) + 1, **fields}
        if index is not None:
            plain[Attr.INDEX_PK], plain[Attr.INDEX_SK] = index
        item = {k: codec.to_attr(v) for k, v in plain.items()}
        if version is None:
            return self._table.put(item, "attribute_not_exists(#id)", {"#id": Attr.ID}).applied
        names, values = {"#v": "v"}, {":v": {"N": str(version)}}
        for n, (name, value) in enumerate((holding or {}).items()):
            names[f"#h{n}"], values[f":h{n}"] = name, codec.to_attr(value)
        condition = " AND ".join(f"{name} = {name.replace('#', ':')}" for name in names)
        return self._table.put(item, condition, names, values).applied

    @calls("dynamodb:GetItem")
    def get(self, item_id: str) -> dict[str, Any] | None:
        found = self._table.get(item_id)
        return codec.from_item(found) if found else None

    @calls("dynamodb:BatchGetItem")
    def get_many(
        self, item_ids: Iterable[str], fields: tuple[str, ...] = (), consistent: bool = False
    ) -> dict[str, dict[str, Any]]:
        """Items by id, only `fields` if given (a large payload then costs nothing to read); by default
        eventually consistent: a state up to about a second old, at half the price."""
        projection = tuple(dict.fromkeys((Attr.ID, *fields))) if fields else ()
        items = self._table.batch_get(item_ids, consistent=consistent, fields=projection)
        raws = (codec.from_item(item) for item in items)
        return {raw[Attr.ID]: raw for raw in raws}

    @calls("dynamodb:DeleteItem")
    def delete(self, item_id: str, holding: dict[str, Any] | None = None) -> bool:
        """Delete an item; with `holding`, only while it holds each of those fields with that value (decided in
        the delete itself). Whether an item was deleted."""
        if not holding:
            return self._table.delete(item_id) is not None
        names = {f"#h{n}": name for n, name in enumerate(holding)}
        values = {f":h{n}": codec.to_attr(value) for n, value in enumerate(holding.values())}
        condition = " AND ".join(f"#h{n} = :h{n}" for n in range(len(holding)))
        return self._table.delete_if(item_id, condition, names, values)

    @calls(IndexStore.ids)
    def partition(self, name: str, up_to_ms: int) -> Iterator[str]:
        """Ids of the items indexed in a partition with next_timestamp <= up_to_ms."""
        return self._index.ids(name, up_to_ms)


# The stored schedule's spec (its JSON, naming its lambda): what a lambda's own put conditions its write on.
SPEC_FIELD = "spec"


SCHEDULE_ID_PREFIX = "#schedule#"


def schedule_id(name: str) -> str:
    return f"{SCHEDULE_ID_PREFIX}{name}"


def schedule_name(item_id: str) -> str:
    return item_id.removeprefix(SCHEDULE_ID_PREFIX)


def schedule_fields(schedule: Schedule) -> tuple[dict[str, Any], tuple[str, int]]:
    fields: dict[str, Any] = {
        "sname": schedule.name,
        SPEC_FIELD: schedule.spec_json(),
        "paused": schedule.paused,
        "created": to_ms(schedule.created_at),
        "fired": schedule.fired,
        "skipped": schedule.skipped,
    }
    for key, value in (("last", schedule.last_occurrence), ("next", schedule.next_occurrence)):
        if value is not None:
            fields[key] = to_ms(value)
    if schedule.last_task_id:
        fields["task"] = schedule.last_task_id
    due_ms = PARKED_MS if schedule.paused or schedule.next_occurrence is None else to_ms(schedule.next_occurrence)
    return fields, (SCHEDULES_PARTITION, due_ms)


def schedule_from(raw: dict[str, Any]) -> Schedule:
    return Schedule(
        name=raw["sname"],
        spec=ScheduleSpec.model_validate(json.loads(raw[SPEC_FIELD]), context=STORED),
        paused=bool(raw.get("paused")),
        created_at=from_ms(raw["created"]),
        last_occurrence=maybe_from_ms(raw.get("last")),
        next_occurrence=None if raw.get("paused") else maybe_from_ms(raw.get("next")),  # paused before it was None
        last_task_id=raw.get("task"),
        fired=int(raw.get("fired", 0)),
        skipped=int(raw.get("skipped", 0)),
        version=int(raw.get("v", 0)),
    )
