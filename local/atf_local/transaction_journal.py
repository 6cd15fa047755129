"""moto's TransactWriteItems, backed up by the items its entries name instead of a copy of every table.

Before it writes, moto deep-copies each table a transaction names, and puts the copy back if an entry
fails. That costs the whole table, whatever the transaction: with a few thousand tasks in the table each
keyed task's transaction copied them all, and in `make test` the copies were the largest part of
in-process moto's time in one xdist worker (py-spy: 21.6 s of its ~280 s). Here a transaction's backup
is the items its entries name (at most 100), and a rollback writes them back through the table's own
put and delete, so the index filings (atf_local.partitions) follow. The table object stays the one
moto serves. The wrapper runs under the lock every DynamoDB call takes (atf_local.atomic), so no other
call comes between the backup and a rollback.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.dynamo_type import DynamoType, Item
    from moto.dynamodb.models.table import Table

    Saved = tuple[Table, DynamoType, DynamoType | None, Item | None]

# On the thread running a transaction: moto's copy of a whole table is the table itself.
_journaling = threading.local()


def journaled(transact: Callable[..., Any]) -> Callable[..., Any]:
    """`transact` (DynamoDBBackend.transact_write_items) with the items it names as its backup."""
    from moto.dynamodb.models.table import Table

    Table.__deepcopy__ = _table_copy  # type: ignore[attr-defined]

    @functools.wraps(transact)
    def call(self: DynamoDBBackend, transact_items: list[dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
        saved = _backup(self, transact_items)
        _journaling.on = True
        try:
            return transact(self, transact_items, *args, **kwargs)
        except BaseException:
            _restore(saved)  # moto put its "copies" back: the tables themselves, as they are now
            raise
        finally:
            _journaling.on = False

    call._atf_journaled = True  # type: ignore[attr-defined]
    return call


def _table_copy(self: Table, memo: dict[int, Any]) -> Table:
    if getattr(_journaling, "on", False):
        return self
    clone = object.__new__(type(self))  # a plain deep copy, as without this method (a backup, a restore)
    memo[id(self)] = clone
    clone.__dict__.update(copy.deepcopy(self.__dict__, memo))
    return clone


def _backup(backend: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> list[Saved]:
    """Each named item as it is now (None: absent). An entry moto will refuse (no such table, a key that
    does not fit) writes nothing and is left out."""
    saved: list[Saved] = []
    for entry in transact_items:
        for operation in entry.values():
            table = backend.tables.get(str(operation.get("TableName"))) if isinstance(operation, dict) else None
            if table is None:
                continue
            try:
                hash_key, range_key = backend.get_keys_value(table, operation.get("Key") or operation.get("Item", {}))
                current = table.get_item(hash_key, range_key)
            except Exception:  # noqa: BLE001  (moto answers this entry with its own error)
                continue
            saved.append((table, hash_key, range_key, copy.deepcopy(current)))
    return saved


def _restore(saved: list[Saved]) -> None:
    for table, hash_key, range_key, item in reversed(saved):  # an item named twice: its first state last
        if item is None:
            table.delete_item(hash_key, range_key)
        else:
            table.put_item(item.to_json()["Attributes"], overwrite=True)
