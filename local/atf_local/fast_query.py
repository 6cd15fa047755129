"""Make moto's DynamoDB Query cost what DynamoDB's does: one partition, not the whole table.

moto's Table.query starts from Table.all_items(), a list of every item in the
table sorted by primary key (Python comparisons of DynamoType), keeps the
items of the queried partition, and then sorts those again by the key it
answers in. With thousands of tasks in the table every poll of a shard of the
scheduling index paid for the whole table, and the embedded AWS ran some three
times slower than with an empty one.

Here a Query hands Table.query only its candidates, in no particular order:
on the table, the items stored under the queried hash key (moto keeps them in
one dict per hash key); on an index, the items whose index hash key has the
queried value, which partitions.py keeps filed by that value as they are written.
Table.query still applies every one of its own conditions to them and still
sorts what passes on the whole key it answers in (index keys, then the
table's, unique per item), so the same items come back in the same order,
with the same LastEvaluatedKey and counts: the global sort it skips never
decided any order.

It also projects an item onto an index (KEYS_ONLY, INCLUDE) by taking the
attributes the index keeps as they are stored, where moto converted the whole
item to plain Python and back once per attribute kept.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from atf_local.index_copies import cheap_copies, kept_names, projecting
from atf_local.partitions import FILED_TYPES, every_item, items_with, keep_filed

if TYPE_CHECKING:
    from moto.dynamodb.models.dynamo_type import Item
    from moto.dynamodb.models.table import Table

SCALARS_AS_STORED = frozenset({"S", "B", "BOOL"})  # moto's cast_value returns these values as they are
# The candidates of the Query running on this thread, taken once by the all_items() it calls.
_pending = threading.local()


def fast_queries() -> None:
    """Let moto's DynamoDB queries read only their partition, in this process (idempotent)."""
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import SecondaryIndex, Table

    keep_filed()
    cheap_copies()
    if getattr(Table.query, "_atf_fast", False):
        return
    signature = inspect.signature(Table.query)
    Table.all_items = _pending_or(Table.all_items)  # type: ignore[method-assign,assignment]
    Table.query = _with_candidates(Table.query, signature)  # type: ignore[method-assign]
    SecondaryIndex.project = _picking(SecondaryIndex.project)  # type: ignore[method-assign,assignment]
    Table.sorted_items = _without_moved(Table.sorted_items)  # type: ignore[method-assign]
    kind: Any = DynamoType  # cast_value is a property moto's stubs type as a method
    kind.cast_value = _quick_cast(kind.cast_value)


def _without_moved(sorted_items: Callable[..., list[Item]]) -> Callable[..., list[Item]]:
    """moto's sort of a Query's candidates, leaving out an item a concurrent write took out of the index
    between the two (moto's reads take no lock, and updates change items in place): moto's own sort failed
    the whole Query with a KeyError on the attribute that was removed, a few times per benchmark run."""

    @functools.wraps(sorted_items)  # __wrapped__: moto's sort, which this replaces (tests switch back to it)
    def call(
        self: Table, hash_key_attrs: list[str], range_key_attrs: list[str | None], items: list[Item]
    ) -> list[Item]:
        names = self._generate_attr_to_sort_by(hash_key_attrs, range_key_attrs)
        keyed = []
        for item in items:
            attrs = item.attrs
            try:
                # Each key value cast once: DynamoType's comparisons cast both sides every time.
                keyed.append((tuple([attrs[name].cast_value for name in names]), item))
            except KeyError:
                continue
        keyed.sort(key=lambda pair: pair[0])
        return [item for _, item in keyed]

    return call


def _quick_cast(cast_value: property) -> property:
    """A value as moto compares it (DynamoType's comparisons compare cast values), for the scalar types
    without moto's chain of type tests: the most time of any function in a large index Query (its sort,
    and its check of each candidate's hash key). Other types take moto's own path."""
    moto_cast = cast_value.fget
    assert moto_cast is not None

    def cast(self: Any) -> Any:
        kind = self.type
        if kind == "N":
            return Decimal(self.value)
        if kind in SCALARS_AS_STORED:
            return self.value
        return moto_cast(self)

    cast.moto = moto_cast  # type: ignore[attr-defined]  # for the tests
    return property(cast)


def _picking(project: Callable[[Any, Item], Item]) -> Callable[[Any, Item], Item]:
    """An index's projection of an item: its key attributes and the included ones, taken as they are.
    moto converts the whole item to plain Python and back once per attribute it keeps (ten times for the
    scheduling index), and builds the result in a dict that adds up the size of every attribute already in
    it at each insert; the values it ends with are the ones stored (a number in DynamoDB's canonical form, a
    set's members in any order). The projected item shares its values with the item given, which moto's
    Query and Scan deep-copy from the table just before (the copy is theirs alone), and it is no larger
    than that item, which passed moto's size check when written."""

    @functools.wraps(project)
    def picked(self: Any, item: Item) -> Item:
        names = kept_names(self)
        if names is None:
            return project(self, item)  # ALL, or none given: the item, as moto returns it
        from moto.dynamodb.models.dynamo_type import Item as MotoItem
        from moto.dynamodb.models.dynamo_type import LimitedSizeDict

        kept = LimitedSizeDict.__new__(LimitedSizeDict)
        dict.update(kept, ((name, item.attrs[name]) for name in names if name in item.attrs))
        projected: Item = object.__new__(MotoItem)  # an Item without Item.__init__'s conversions
        projected.hash_key, projected.range_key, projected.attrs = item.hash_key, item.range_key, kept
        return projected

    return picked


def _with_candidates(query: Callable[..., Any], signature: inspect.Signature) -> Callable[..., Any]:
    @functools.wraps(query)
    def call(self: Table, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs).arguments
        candidates = _candidates(self, bound)
        index = bound.get("index_name")
        outer = getattr(_pending, "query", None)
        _pending.query = (self, candidates) if candidates is not None else None
        try:
            with projecting(_kept_by(self, index)):
                return query(self, *args, **kwargs)
        finally:
            _pending.query = outer

    call._atf_fast = True  # type: ignore[attr-defined]
    return call


def _kept_by(table: Table, index_name: str | None) -> list[str] | None:
    """What the queried index keeps of an item (None: the whole item, or no such index: moto says so)."""
    index = {index.name: index for index in table.all_indexes()}.get(index_name or "")
    return kept_names(index) if index is not None else None


def _pending_or(all_items: Callable[[Table], list[Item]]) -> Callable[[Table], list[Item]]:
    @functools.wraps(all_items)
    def call(self: Table) -> list[Item]:
        pending = getattr(_pending, "query", None)
        if pending is None or pending[0] is not self:
            return all_items(self)
        _pending.query = None  # once: anything else that reads all items gets them all, sorted
        return list(pending[1])

    return call


def _candidates(table: Table, bound: dict[str, Any]) -> list[Item] | None:
    """A superset of the items the Query can answer, unsorted; None: all of them, as moto reads them."""
    if bound.get("index_name"):
        return _index_candidates(table, bound.get("hash_key_conditions"))
    from moto.dynamodb.models.dynamo_type import DynamoType

    hash_key = bound.get("hash_key")
    if not isinstance(hash_key, DynamoType):
        return None
    try:
        stored = table.items.get(hash_key)
    except TypeError:  # an unhashable key value: moto's own path answers it
        return None
    if stored is None:
        return []
    # moto files a table's items under their hash key: by range key in a dict, or alone without a range key
    return list(stored.values()) if table.range_key_attr else [stored]  # type: ignore[list-item]


def _index_candidates(table: Table, hash_conditions: list[tuple[str, Any]] | None) -> list[Item]:
    if not hash_conditions:
        return every_item(table)
    name, wanted = hash_conditions[0]
    # Other types (numbers, cast to Decimal) are left to moto's comparison, over every item.
    if getattr(wanted, "type", None) not in FILED_TYPES:
        return every_item(table)
    return items_with(table, name, wanted.type, wanted.value)
