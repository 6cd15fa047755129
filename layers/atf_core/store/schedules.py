"""Schedules and chains live in the task table too, as items of their own.

A schedule item is indexed in one partition of the scheduling index, keyed
by its next occurrence, so the consumer finds due schedules with the same
kind of query it uses for tasks; a paused schedule is parked far in the
future. A chain item lists its links and is indexed while the chain runs,
so the consumer can make sure no finished link leaves its children waiting.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from atf_core.definitions import INDEX_NAME, Attr
from atf_core.recurrence import Schedule, ScheduleSpec
from atf_core.schema import from_ms, maybe_from_ms, to_ms
from atf_core.store import codec

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

SCHEDULES_PARTITION = "cron"
CHAINS_PARTITION = "chains"
PARKED_MS = 253402300799000  # 9999-12-31: a paused schedule is never due


class ItemStore:
    """Plain items (schedules, chains) in the task table, written with optimistic versions."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._db = client
        self._table = table

    def put(self, item_id: str, fields: dict[str, Any], index: tuple[str, int] | None, version: int | None) -> bool:
        """Write an item if its version is still `version` (None: only if it does not exist)."""
        item = {Attr.ID: item_id, "v": (version or 0) + 1, **fields}
        if index is not None:
            item[Attr.INDEX_PK], item[Attr.INDEX_SK] = index
        request: dict[str, Any] = {
            "TableName": self._table,
            "Item": {k: codec.to_attr(v) for k, v in item.items()},
        }
        if version is None:
            request.update(ConditionExpression="attribute_not_exists(#id)", ExpressionAttributeNames={"#id": Attr.ID})
        else:
            request.update(
                ConditionExpression="#v = :v",
                ExpressionAttributeNames={"#v": "v"},
                ExpressionAttributeValues={":v": {"N": str(version)}},
            )
        try:
            self._db.put_item(**request)
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def get(self, item_id: str) -> dict[str, Any] | None:
        found = self._db.get_item(TableName=self._table, Key={Attr.ID: {"S": item_id}}, ConsistentRead=True)
        return codec.from_item(found["Item"]) if "Item" in found else None

    def delete(self, item_id: str) -> bool:
        reply = self._db.delete_item(TableName=self._table, Key={Attr.ID: {"S": item_id}}, ReturnValues="ALL_OLD")
        return "Attributes" in reply

    def partition(self, name: str, up_to_ms: int) -> Iterator[str]:
        """Ids of the items indexed in a partition with next_timestamp <= up_to_ms."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": INDEX_NAME,
            "KeyConditionExpression": "#pk = :pk AND #sk <= :upto",
            "ExpressionAttributeNames": {"#pk": Attr.INDEX_PK, "#sk": Attr.INDEX_SK},
            "ExpressionAttributeValues": {":pk": {"S": name}, ":upto": {"N": str(up_to_ms)}},
        }
        while True:
            page = self._db.query(**request)
            yield from (str(item[Attr.ID]["S"]) for item in page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def schedule_id(name: str) -> str:
    return f"#schedule#{name}"


def schedule_fields(schedule: Schedule) -> tuple[dict[str, Any], tuple[str, int]]:
    fields: dict[str, Any] = {
        "sname": schedule.name,
        "spec": schedule.spec_json(),
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
        spec=ScheduleSpec.model_validate(json.loads(raw["spec"])),
        paused=bool(raw.get("paused")),
        created_at=from_ms(raw["created"]),
        last_occurrence=maybe_from_ms(raw.get("last")),
        next_occurrence=maybe_from_ms(raw.get("next")),
        last_task_id=raw.get("task"),
        fired=int(raw.get("fired", 0)),
        skipped=int(raw.get("skipped", 0)),
        version=int(raw.get("v", 0)),
    )
