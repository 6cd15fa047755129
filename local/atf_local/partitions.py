"""A table's items filed by the value of an index's hash key, kept as they are written: an index Query's
candidates are then its partition, as on DynamoDB, not a pass over the whole table.

fast_query picked an index Query's candidates out of every item of the table. Beside issue 16's flood
(5,000 waiting tasks of one key, each poll a Query per index partition) that pass was the largest part
of moto's DynamoDB server's time (15% of its CPU, py-spy).

Items enter and leave moto's tables only through Table.put_item and Table.delete_item (every write,
batch, transaction and PartiQL statement goes through them), and change in place only in
DynamoDBBackend.update_item; each is followed here by filing the one item again. A table whose item dict
moto replaced (a restore) or a transaction rolled back (moto puts back a copy of the table) is filed anew
on its next Query. Values other than strings and binaries (numbers, which moto compares as decimals) are
not filed: a Query for one takes fast_query's pass over the table.
"""

from __future__ import annotations

import functools
import inspect
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from moto.dynamodb.models.dynamo_type import Item
    from moto.dynamodb.models.table import Table

FILED_TYPES = frozenset({"S", "B"})  # types whose DynamoType equals another exactly when type and value do
ItemKey = tuple[Any, ...]
# Building a filing and filing a written item take this lock, so a write during a build is filed after it.
_lock = threading.Lock()
_filings: weakref.WeakKeyDictionary[Table, dict[str, Filing]] = weakref.WeakKeyDictionary()


class Filing:
    """One table's items by the value of one attribute (string and binary values only)."""

    def __init__(self, table: Table, name: str) -> None:
        self.items = table.items  # moto's dict of the table's items: replaced by a restore
        self.name = name
        self._by_value: dict[tuple[str, Any], dict[ItemKey, Item]] = {}
        self._value_of: dict[ItemKey, tuple[str, Any]] = {}
        for item in every_item(table):
            self.file(item)

    def file(self, item: Item) -> None:
        key = item_key(item)
        self.drop(key)
        found = item.attrs.get(self.name)
        if found is not None and found.type in FILED_TYPES:
            value = (found.type, found.value)
            self._value_of[key] = value
            self._by_value.setdefault(value, {})[key] = item

    def drop(self, key: ItemKey) -> None:
        value = self._value_of.pop(key, None)
        if value is not None:
            bucket = self._by_value[value]
            del bucket[key]
            if not bucket:
                del self._by_value[value]

    def members(self, kind: str, value: Any) -> list[Item]:
        return list(self._by_value.get((kind, value), {}).values())


def items_with(table: Table, name: str, kind: str, value: Any) -> list[Item]:
    """Every item of `table` whose attribute `name` is the string or binary `value` (of type `kind`)."""
    with _lock:
        filings = _filings.setdefault(table, {})
        filing = filings.get(name)
        if filing is None or filing.items is not table.items:
            filing = filings[name] = Filing(table, name)
        return filing.members(kind, value)


def every_item(table: Table) -> list[Item]:
    """The table's items, in no particular order (moto files them by hash key, then by range key if any)."""
    stored = list(table.items.values())
    if not table.range_key_attr:
        return stored  # type: ignore[return-value]  # moto's stubs type every value as a dict by range key
    return [item for by_range in stored for item in list(by_range.values())]


def item_key(item: Item) -> ItemKey:
    return key_of(item.hash_key, item.range_key)


def key_of(hash_key: Any, range_key: Any) -> ItemKey:
    """An item's key as moto files it (its dicts hash a DynamoType by type and stored value)."""
    if range_key is None:
        return (hash_key.type, hash_key.value)
    return (hash_key.type, hash_key.value, range_key.type, range_key.value)


def keep_filed() -> None:
    """File every item again as moto writes it, in this process (idempotent)."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    if getattr(Table.put_item, "_atf_filed", False):
        return
    Table.put_item = _filing_put(Table.put_item)  # type: ignore[method-assign]
    Table.delete_item = _filing_delete(Table.delete_item)  # type: ignore[method-assign]
    DynamoDBBackend.update_item = _filing_update(DynamoDBBackend.update_item)  # type: ignore[method-assign]


def _refile(table: Table, item: Item | None, key: ItemKey | None) -> None:
    with _lock:
        for filing in _filings.get(table, {}).values():
            if item is not None:
                filing.file(item)
            elif key is not None:
                filing.drop(key)


def _filing_put(put_item: Callable[..., Item]) -> Callable[..., Item]:
    @functools.wraps(put_item)
    def call(self: Table, *args: Any, **kwargs: Any) -> Item:
        item = put_item(self, *args, **kwargs)
        _refile(self, item, None)
        return item

    call._atf_filed = True  # type: ignore[attr-defined]
    return call


def _filing_delete(delete_item: Callable[..., Item | None]) -> Callable[..., Item | None]:
    @functools.wraps(delete_item)
    def call(self: Table, *args: Any, **kwargs: Any) -> Item | None:
        item = delete_item(self, *args, **kwargs)
        if item is not None:
            _refile(self, None, item_key(item))
        return item

    return call


def _filing_update(update_item: Callable[..., Item]) -> Callable[..., Item]:
    """moto's update changes the stored item in place (or stores a new one): whatever is stored under the
    key once the update is over is filed again, also after a refusal (an update that failed part way may
    have changed the item already)."""
    signature = inspect.signature(update_item)

    @functools.wraps(update_item)
    def call(self: Any, *args: Any, **kwargs: Any) -> Item:
        try:
            return update_item(self, *args, **kwargs)
        finally:
            bound = signature.bind(self, *args, **kwargs).arguments
            _refile_key(self, bound.get("table_name"), bound.get("key"))

    return call


def _refile_key(backend: Any, table_name: Any, key: Any) -> None:
    table = backend.tables.get(table_name) if isinstance(table_name, str) else None
    if table is None or table not in _filings:
        return
    from moto.dynamodb.exceptions import MockValidationException

    try:
        hash_value, range_value = backend.get_keys_value(table, key)
    except (MockValidationException, KeyError, TypeError, AttributeError):  # refused: the update changed nothing
        return
    stored = table.items.get(hash_value)  # moto's dicts: by range key if the table has one, else the item
    item = stored.get(range_value) if range_value is not None and stored is not None else stored
    _refile(table, item, None if item is not None else key_of(hash_value, range_value))
