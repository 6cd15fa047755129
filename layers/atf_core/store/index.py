"""Reads of the sparse scheduling index: what is due, what lies in a window, how much a partition holds.

A partition is "<assoc>#<lambda>#<priority>#<shard>" (codec.index_partition),
sorted by next_timestamp; the consumer, the dead letters and the statistics
all read it here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from itertools import islice
from typing import TYPE_CHECKING, Any

from atf_core.calls import calls
from atf_core.definitions import Attr
from atf_core.schema import to_ms
from atf_core.store import codec
from atf_core.store.base import DueEntry, Flow, ReadPast
from atf_core.store.table import Expression, Table

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


# A read past some flows' backlog is billed for every entry of theirs it passes (some 150 bytes each):
# it stops after this many, about 110 read units (0.9 MB). Counted in entries, not in DynamoDB's 1 MB
# pages, which moto's server fills by whole items rather than by the index's projection.
READ_PAST = 6000
MAX_IN_VALUES = 100  # DynamoDB's bound on the values of one IN list (its expression reference)


class IndexStore:
    def __init__(self, client: DynamoDBClient, table: str, page_size: int | None = None) -> None:
        self._table = Table(client, table)
        self._page_size = page_size

    @calls("dynamodb:Query")
    def due(
        self, partition: str, up_to: datetime, skip_collections: Iterable[str] = (), first_page: int | None = None
    ) -> Iterator[DueEntry]:
        """Entries due by `up_to`, oldest first, but for those of the collections to skip; the first page of
        `first_page` entries, if given, each next one twice as large, up to the page size."""
        skipped, left_out = _split_skips(skip_collections)
        filter = _skipping(skipped, [])
        limit, grow_to = self._page_size, None
        if first_page is not None:
            limit, grow_to = min(first_page, self._page_size or first_page), self._page_size
        pages = self._table.query_index(partition, high=to_ms(up_to), filter=filter, limit=limit, grow_to=grow_to)
        for page in pages:
            yield from _entries(page, left_out)

    @calls("dynamodb:Query")
    def read_past(
        self,
        partition: str,
        up_to: datetime,
        flows: Iterable[Flow],
        skip_collections: Iterable[str] = (),
        since_ms: int | None = None,
        limit: int = 100,
    ) -> ReadPast:
        """Up to `limit` entries due by `up_to` (from `since_ms` on) that are not of `flows`, oldest first,
        having passed over at most READ_PAST entries; and where every entry passed over was theirs: up to
        the first one found, else to where the read stopped (its last key), else to `up_to`."""
        skipped, left_out = _split_skips(skip_collections)
        filter = _skipping(skipped, sorted(set(flows), key=str))
        high = to_ms(up_to)
        pages = self._table.query_index(partition, low=since_ms, high=high, filter=filter, limit=READ_PAST)
        found: list[DueEntry] = []
        evaluated, clear_to = 0, high
        for page in pages:
            found += _entries(page, left_out)
            evaluated += int(page.get("ScannedCount", len(page.get("Items", []))))
            last = page.get("LastEvaluatedKey")
            if found:
                clear_to = found[0].next_ms
            elif last is not None and evaluated >= READ_PAST:
                clear_to = int(last[Attr.INDEX_SK]["N"])
            if len(found) >= limit or evaluated >= READ_PAST:
                break
        return ReadPast(found[:limit], clear_to)

    @calls("dynamodb:Query")
    def entries(
        self, partition: str, low: datetime, high: datetime, equal: dict[str, str] | None = None
    ) -> Iterator[DueEntry]:
        """Entries with low <= next_timestamp <= high, only those whose projected attributes equal `equal`."""
        pairs = sorted((equal or {}).items())
        filter = None
        if pairs:
            filter = Expression(
                " AND ".join(f"#f{i} = :f{i}" for i in range(len(pairs))),
                {f"#f{i}": attr for i, (attr, _) in enumerate(pairs)},
                {f":f{i}": {"S": value} for i, (_, value) in enumerate(pairs)},
            )
        for page in self._table.query_index(partition, to_ms(low), to_ms(high), filter=filter):
            yield from (codec.due_entry(item) for item in page.get("Items", []))

    @calls("dynamodb:Query")
    def ids(self, partition: str, up_to_ms: int) -> Iterator[str]:
        """Ids of the items indexed in a partition with next_timestamp <= up_to_ms."""
        for page in self._table.query_index(partition, high=up_to_ms):
            yield from (str(item[Attr.ID]["S"]) for item in page.get("Items", []))

    @calls("dynamodb:Query")
    def count(self, partition: str, low: int | None, high: int | None, max_pages: int) -> tuple[int, bool]:
        """Entries in a partition (low <= next_timestamp <= high), and whether `max_pages` cut the count short."""
        total, more = 0, False
        for page in islice(self._table.query_index(partition, low, high, count=True), max_pages):
            total += page["Count"]
            more = "LastEvaluatedKey" in page
        return total, more

    @calls("dynamodb:Query")
    def oldest(self, partition: str, high: int | None, limit: int) -> tuple[list[DueEntry], bool]:
        """The oldest `limit` entries of a partition (up to `high`), and whether it holds more."""
        page = next(self._table.query_index(partition, high=high, limit=limit))
        return [codec.due_entry(item) for item in page.get("Items", [])], "LastEvaluatedKey" in page


def _split_skips(collections: Iterable[str]) -> tuple[list[str], frozenset[str]]:
    """The collections to skip as (those the Query's filter leaves out, those left out here once read).
    DynamoDB takes at most MAX_IN_VALUES values in an IN list (moto takes any number): a lambda with more
    paused collections than that would have every Query of its partitions refused, and none of its tasks
    sent. Their entries are then read and dropped here (the collection is projected into the index)."""
    skipped = sorted(set(collections))
    return (skipped, frozenset()) if len(skipped) <= MAX_IN_VALUES else ([], frozenset(skipped))


def _skipping(collections: list[str], flows: list[Flow]) -> Expression | None:
    """A filter leaving out the entries of some collections, and of some flows: a keyed flow by its key
    (in any collection), a flow without a key by its collection among the entries without one."""
    keys = sorted({key for _, key in flows if key is not None})
    unkeyed = sorted({collection for collection, key in flows if key is None})
    values: dict[str, Any] = {}

    def placeholders(prefix: str, strings: list[str]) -> str:
        names = [f":{prefix}{i}" for i in range(len(strings))]
        values.update({n: {"S": v} for n, v in zip(names, strings, strict=True)})
        return ", ".join(names)

    terms = []
    if collections:
        terms.append(f"NOT #c IN ({placeholders('c', collections)})")
    if keys:
        terms.append(f"NOT #k IN ({placeholders('k', keys)})")
    if unkeyed:
        terms.append(f"NOT (#c IN ({placeholders('u', unkeyed)}) AND attribute_not_exists(#k))")
    if not terms:
        return None
    names = {"#c": Attr.COLLECTION, "#k": Attr.FLOW_KEY}
    text = " AND ".join(terms)
    return Expression(text, {n: a for n, a in names.items() if n in text}, values)


def _entries(page: Any, left_out: frozenset[str] = frozenset()) -> list[DueEntry]:
    # (An item that left the index as the query read it comes back without its key on moto's server.)
    entries = [codec.due_entry(item) for item in page.get("Items", []) if Attr.INDEX_SK in item]
    return [entry for entry in entries if entry.collection not in left_out] if left_out else entries
