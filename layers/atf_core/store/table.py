"""The one door to DynamoDB: every store reads and writes the task table through a `Table`.

It holds the three things every store would otherwise write again: the check
that turns a failed condition into an answer rather than an error, the loop
that pages through a query or a scan, and the batch read that splits keys
into requests of 100 and asks again, backing off, for what DynamoDB left unprocessed.
The stores beside it say what the items mean; this module only moves them.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from atf_core import backoff
from atf_core.definitions import INDEX_NAME, Attr
from atf_core.store.codec import Item

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

Page = dict[str, Any]
BATCH_GET_KEYS = 100  # BatchGetItem's limit per request
# Keys a batch read left unprocessed are asked for again after a full-jitter wait of at most
# 50 ms, 100 ms, ... 2 s. DynamoDB leaves keys out when the answer passed 16 MB (a wait costs
# little beside that read) or when the table throttled part of the batch: the call succeeded, so
# botocore's retries do not cover it, and AWS asks for an exponential backoff before the next try.
UNPROCESSED_WAIT_BASE_S = 0.05
UNPROCESSED_WAIT_CAP_S = 2.0


@dataclass(frozen=True)
class Written:
    """A conditional write's answer: applied, or refused because its condition did not hold.

    `item` is the item as written when the write asked for it (ALL_NEW), or as it stood
    when a refused write asked for that (ALL_OLD on condition check failure).
    """

    applied: bool
    item: Item | None = None


@dataclass(frozen=True)
class Expression:
    """A condition or filter with its placeholders."""

    text: str
    names: dict[str, str]
    values: dict[str, Any]


class Table:
    def __init__(self, client: DynamoDBClient, name: str, sleep: Callable[[float], None] = time.sleep) -> None:
        self._db = client
        self.name = name
        self._sleep = sleep

    # -- single items -----------------------------------------------------------
    def get(self, item_id: str) -> Item | None:
        """The item as last written (a strongly consistent read)."""
        found = self._db.get_item(TableName=self.name, Key=_key(item_id), ConsistentRead=True)
        return found.get("Item") or None

    def put(
        self,
        item: Item,
        condition: str | None = None,
        names: dict[str, str] | None = None,
        values: dict[str, Any] | None = None,
        old_on_refusal: bool = False,
    ) -> Written:
        return self.put_as(put_request(self.name, item, condition, names, values, old_on_refusal))

    def put_as(self, request: dict[str, Any]) -> Written:
        """Send a PutItem built by `put_request` for this table."""
        if request["TableName"] != self.name:
            raise ValueError(f"a put for table {request['TableName']!r} sent to {self.name!r}")
        return _conditional(self._db.put_item, request)

    def update(
        self,
        item_id: str,
        update: str,
        condition: str | None = None,
        names: dict[str, str] | None = None,
        values: dict[str, Any] | None = None,
        new: bool = False,
        old_on_refusal: bool = False,
    ) -> Written:
        request: dict[str, Any] = {"TableName": self.name, "Key": _key(item_id), "UpdateExpression": update}
        if new:
            request["ReturnValues"] = "ALL_NEW"
        _placeholders(request, condition, names, values, old_on_refusal)
        return _conditional(self._db.update_item, request)

    def transact(self, entries: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        """Write the entries (TransactWriteItems' Put/Update/... entries) all or none: None when written, or
        DynamoDB's reasons entry by entry when a condition or another transaction cancelled it."""
        try:
            self._db.transact_write_items(TransactItems=entries)  # type: ignore[arg-type]
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            return list(error.response.get("CancellationReasons") or [])  # type: ignore[arg-type]
        return None

    def delete(self, item_id: str) -> Item | None:
        """Delete an item; the item as it was, or None if there was none."""
        reply = self._db.delete_item(TableName=self.name, Key=_key(item_id), ReturnValues="ALL_OLD")
        return reply.get("Attributes") or None

    def delete_if(self, item_id: str, condition: str, names: dict[str, str], values: dict[str, Any]) -> bool:
        """Delete an item only where the condition holds (a missing item fails it): whether it was deleted."""
        request: dict[str, Any] = {"TableName": self.name, "Key": _key(item_id)}
        _placeholders(request, condition, names, values, False)
        return _conditional(self._db.delete_item, request).applied

    # -- many items -------------------------------------------------------------
    def batch_get(self, item_ids: Iterable[str], consistent: bool, fields: tuple[str, ...] = ()) -> Iterator[Item]:
        """The items that exist among these ids, in no particular order (only `fields`, if given)."""
        ids = list(dict.fromkeys(item_ids))  # a request may not name a key twice
        for start in range(0, len(ids), BATCH_GET_KEYS):
            table: dict[str, Any] = {"Keys": [_key(i) for i in ids[start : start + BATCH_GET_KEYS]]}
            if consistent:
                table["ConsistentRead"] = True
            if fields:
                names = {f"#a{i}": field for i, field in enumerate(fields)}
                table.update(ProjectionExpression=", ".join(names), ExpressionAttributeNames=names)
            yield from self._read_all({self.name: table})

    def _read_all(self, request: dict[str, Any]) -> Iterator[Item]:
        """One BatchGetItem request's items, asking again for the keys left unprocessed until none are."""
        retry = 0
        while True:
            reply = self._db.batch_get_item(RequestItems=request)
            yield from reply["Responses"].get(self.name, [])
            request = reply.get("UnprocessedKeys") or {}
            if not request:
                return
            retry += 1
            self._sleep(backoff.full_jitter(retry, UNPROCESSED_WAIT_BASE_S, UNPROCESSED_WAIT_CAP_S, random.random()))

    def query_index(
        self,
        partition: str,
        low: int | None = None,
        high: int | None = None,
        filter: Expression | None = None,
        limit: int | None = None,
        count: bool = False,
        grow_to: int | None = None,
    ) -> Iterator[Page]:
        """Pages of one partition of the scheduling index, oldest first, with low <= next_timestamp <= high;
        with `grow_to`, each page after the first asks for twice as many entries as the one before, up to it."""
        request: dict[str, Any] = {
            "TableName": self.name,
            "IndexName": INDEX_NAME,
            "KeyConditionExpression": "#pk = :pk",
            "ExpressionAttributeNames": {"#pk": Attr.INDEX_PK},
            "ExpressionAttributeValues": {":pk": {"S": partition}},
        }
        bounds = {":low": low, ":high": high}
        if any(v is not None for v in bounds.values()):
            request["ExpressionAttributeNames"]["#sk"] = Attr.INDEX_SK
            request["KeyConditionExpression"] += " AND " + _sort_condition(low, high)
            request["ExpressionAttributeValues"].update({k: {"N": str(v)} for k, v in bounds.items() if v is not None})
        if filter is not None:
            request["FilterExpression"] = filter.text
            request["ExpressionAttributeNames"].update(filter.names)
            request["ExpressionAttributeValues"].update(filter.values)
        if limit is not None:
            request["Limit"] = limit
        if count:
            request["Select"] = "COUNT"
        return self._pages(self._db.query, request, grow_to)

    def scan(self, filter: Expression) -> Iterator[Page]:
        """Pages of the whole table (strongly consistent): for local tools only, never a deployed path."""
        request: dict[str, Any] = {"TableName": self.name, "ConsistentRead": True, "FilterExpression": filter.text}
        request["ExpressionAttributeNames"] = filter.names
        if filter.values:
            request["ExpressionAttributeValues"] = filter.values
        return self._pages(self._db.scan, request)

    @staticmethod
    def _pages(call: Callable[..., Any], request: dict[str, Any], grow_to: int | None = None) -> Iterator[Page]:
        """The one paging loop: each page in turn until DynamoDB says there is no more (with `grow_to`, each
        page's Limit twice the last one's, up to it)."""
        while True:
            page: Page = call(**request)
            yield page
            if "LastEvaluatedKey" not in page:
                return
            request = {**request, "ExclusiveStartKey": page["LastEvaluatedKey"]}
            if grow_to is not None and "Limit" in request:
                request["Limit"] = min(2 * request["Limit"], grow_to)


def put_request(
    table: str,
    item: Item,
    condition: str | None = None,
    names: dict[str, str] | None = None,
    values: dict[str, Any] | None = None,
    old_on_refusal: bool = False,
) -> dict[str, Any]:
    """A PutItem's parameters: what `Table.put` sends, and what a TransactWriteItems `Put` entry holds."""
    request: dict[str, Any] = {"TableName": table, "Item": item}
    _placeholders(request, condition, names, values, old_on_refusal)
    return request


def _key(item_id: str) -> Item:
    return {Attr.ID: {"S": item_id}}


def _sort_condition(low: int | None, high: int | None) -> str:
    if low is not None and high is not None:
        return "#sk BETWEEN :low AND :high"
    return "#sk >= :low" if low is not None else "#sk <= :high"


def _placeholders(
    request: dict[str, Any],
    condition: str | None,
    names: dict[str, str] | None,
    values: dict[str, Any] | None,
    old_on_refusal: bool,
) -> None:
    if condition is not None:
        request["ConditionExpression"] = condition
    if names:
        request["ExpressionAttributeNames"] = names
    if values:
        request["ExpressionAttributeValues"] = values
    if old_on_refusal:
        request["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"


def _conditional(call: Callable[..., Any], request: dict[str, Any]) -> Written:
    """The one condition check: a refused condition is an answer (with the item as it stood, if
    asked for); any other error is raised."""
    try:
        reply = call(**request)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
            raise
        return Written(applied=False, item=error.response.get("Item") or None)  # type: ignore[arg-type]
    return Written(applied=True, item=reply.get("Attributes") or None)
