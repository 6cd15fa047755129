"""Make moto's DynamoDB writes atomic, as DynamoDB's are.

moto checks a write's condition and then applies it in separate Python steps,
with no lock, and its server answers requests on many threads: two writes on
one item can both pass their conditions. A heartbeat in flight as its task's
result lands could then turn a finished task back into a running one, which
DynamoDB, where a conditional write is atomic per item, never does. The
embedded AWS is there to behave like AWS, so its DynamoDB writes run one at a
time.

moto also applies an UpdateItem's actions to the stored item one by one, and a
GetItem's answer is that stored item itself, written out after the backend
returns it. A read between two of a write's actions showed half of it: a task
`success` with no result yet (seen by `AtfClient.wait` in a user's round). So
each DynamoDB call, its answer included, runs under the same lock: a read sees
a write whole or not at all, as on DynamoDB. The server's CPU is one core's
under the GIL anyway; the lock orders calls that could not overlap in it.

A transaction that fails is rolled back by the items it named (atf_local.transaction_journal), under the
same lock: moto's own rollback copies every table the transaction names.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

_WRITES = ("put_item", "update_item", "delete_item", "transact_write_items")


def atomic_dynamodb() -> None:
    """Serialise moto's DynamoDB writes, and every DynamoDB call with its answer, in this process
    (idempotent)."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.responses import DynamoHandler

    from atf_local.transaction_journal import journaled

    lock = threading.RLock()
    for name in _WRITES:
        original = getattr(DynamoDBBackend, name)
        if not getattr(original, "_atf_locked", False):
            method = journaled(original) if name == "transact_write_items" else original
            setattr(DynamoDBBackend, name, _locked(method, lock))
    if not getattr(DynamoHandler.call_action, "_atf_locked", False):
        # The backend's writes above keep their own lock for callers that reach the backend directly.
        DynamoHandler.call_action = _locked(DynamoHandler.call_action, lock)  # type: ignore[method-assign]


def _locked(method: Callable[..., Any], lock: threading.RLock) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        with lock:
            return method(*args, **kwargs)

    call._atf_locked = True  # type: ignore[attr-defined]
    return call
