"""An index Query's items copied with only the attributes the index keeps, and each sized as its index entry.

moto's Table.query deep-copies every item it answers, whole (a task has twenty-odd attributes, its
payload among them), and then projects the copies onto the index (nine attributes at most for the
scheduling index). On its way it adds up each item's size twice (to check the 1 MB page, then to count
it). Beside issue 16's flood, a read past thousands of entries spent half its time in those copies and
sizes (cProfile, tests' sizes of items). Inside an index Query whose index keeps some attributes
(KEYS_ONLY, INCLUDE), on the thread running it, a deep copy of an item holds only those, and an item's
size is computed once. moto filters the projected copies, so a filter reads the same attributes either
way; every other copy and size is moto's.

The size is that of the index entry, the attributes the index keeps, as DynamoDB sizes what a query of a
global secondary index reads (its 1 MB page and its read units; atf_local.cost.billing bills the entries
returned the same way). moto sized the whole item: a page of the scheduling index held half the entries
DynamoDB's does, and a read past 5,000 tasks of one key took two Queries where DynamoDB answers one.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from moto.dynamodb.models.dynamo_type import Item

SCALAR_TYPES = frozenset({"S", "N", "B", "BOOL", "NULL"})  # DynamoDB types whose value holds no other value
# On the thread running an index Query: the attributes its index keeps, and the sizes computed so far.
_active = threading.local()


def kept_names(index: Any) -> list[str] | None:
    """The attributes a secondary index keeps of an item, the table's keys first; None: all of them."""
    kind = (index.projection or {}).get("ProjectionType")
    if kind not in ("KEYS_ONLY", "INCLUDE"):
        return None
    names = [*index.table_key_attrs, *(key["AttributeName"] for key in index.schema)]
    if kind == "INCLUDE":
        names += index.projection.get("NonKeyAttributes", [])
    return list(dict.fromkeys(names))


@contextmanager
def projecting(names: list[str] | None) -> Iterator[None]:
    """While inside, on this thread, items are copied keeping only `names` (None: whole) and sized once."""
    outer = getattr(_active, "keep", None), getattr(_active, "sizes", None)
    _active.keep, _active.sizes = (frozenset(names) if names is not None else None), {}
    try:
        yield
    finally:
        _active.keep, _active.sizes = outer


def cheap_copies() -> None:
    """Install the copy and the size above in moto's Item, in this process (idempotent)."""
    from moto.dynamodb.models.dynamo_type import Item

    if getattr(Item.size, "_atf_once", False):
        return
    Item.__deepcopy__ = _keeping(Item.__deepcopy__)  # type: ignore[method-assign,assignment]
    Item.size = _sized_once(Item.size)  # type: ignore[method-assign,assignment]


def _keeping(moto_copy: Callable[[Item, dict[int, Any]], Item]) -> Callable[[Item, dict[int, Any]], Item]:
    from moto.dynamodb.models.dynamo_type import DynamoType, LimitedSizeDict  # once, not per item copied

    def copied(self: Item, memo: dict[int, Any]) -> Item:
        keep = getattr(_active, "keep", None)
        if keep is None:
            return moto_copy(self, memo)

        result = object.__new__(type(self))  # as moto's own copy: no size check of a stored item
        memo[id(self)] = result
        result.hash_key = copy.deepcopy(self.hash_key, memo)
        result.range_key = copy.deepcopy(self.range_key, memo)
        attrs = LimitedSizeDict.__new__(LimitedSizeDict)
        # From a snapshot of the attributes (taken in one step under the GIL): an UpdateItem on another of the
        # server's threads may add one while the values are copied, and iterating the live dict then fails
        # (moto's own copy does, and the server answers 500).
        kept = [(name, value) for name, value in tuple(self.attrs.items()) if name in keep]
        dict.update(attrs, ((name, _value_copy(value, memo, DynamoType)) for name, value in kept))
        result.attrs = attrs
        return result

    copied.moto = moto_copy  # type: ignore[attr-defined]  # for the tests
    return copied


def _value_copy(value: Any, memo: dict[int, Any], dynamo_type: Any) -> Any:
    """A copy of one attribute value: a scalar's new DynamoType (moto's `dynamo_type`) holds the same immutable
    value, as moto's deep copy of it does, without copy.deepcopy's dispatch (an index entry is all scalars);
    others are moto's."""
    if type(value) is not dynamo_type or value.type not in SCALAR_TYPES:
        return copy.deepcopy(value, memo)
    scalar = memo.get(id(value))  # a value the item holds twice (a key) is copied once, as by copy.deepcopy
    if scalar is None:
        scalar = memo[id(value)] = object.__new__(dynamo_type)
        scalar.type, scalar.value = value.type, value.value
    return scalar


def _sized_once(moto_size: Callable[[Item], int]) -> Callable[[Item], int]:
    def size(self: Item) -> int:
        sizes = getattr(_active, "sizes", None)
        if sizes is None:
            return moto_size(self)
        known = sizes.get(id(self))
        if known is None or known[0] is not self:  # an id is reused only once its object is gone
            # moto's size of a snapshot of the attributes the index keeps, for the reason the copy above takes
            # one (seen in CI too: "dictionary changed size during iteration" in the size of a stored item)
            keep = getattr(_active, "keep", None)
            attrs = tuple(self.attrs.items())
            entry = attrs if keep is None else [(name, value) for name, value in attrs if name in keep]
            snapshot = SimpleNamespace(attrs=dict(entry))
            known = sizes[id(self)] = (self, moto_size(snapshot))  # type: ignore[arg-type]
        return known[1]  # type: ignore[no-any-return]

    size._atf_once = True  # type: ignore[attr-defined]
    size.moto = moto_size  # type: ignore[attr-defined]
    return size
