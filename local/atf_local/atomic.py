"""Make moto's DynamoDB calls atomic, as DynamoDB's are.

moto checks a write's condition and then applies it in separate Python steps,
with no lock, and its server answers requests on many threads: two writes on
one item can both pass their conditions. A heartbeat in flight as its task's
result lands could then turn a finished task back into a running one, which
DynamoDB, where a conditional write is atomic per item, never does.

moto also applies an UpdateItem's actions to the stored item one by one, and a
GetItem's answer is that stored item itself, written out after the backend
returns it. A read between two of a write's actions showed half of it: a task
`success` with no result yet (seen by `AtfClient.wait` in a user's round).

So each DynamoDB call, its answer included, runs under one lock: a write is
whole before another call sees or changes its item, as on DynamoDB. The
server's CPU is one core's under the GIL anyway; the lock orders calls that
could not overlap in it.

A transaction that fails is rolled back by the items it named (atf_local.transaction_journal), under the
same lock: moto's own rollback copies every table the transaction names.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any


def atomic_dynamodb() -> None:
    """Run every DynamoDB call of this process, its answer included, one at a time, and roll a failed
    transaction back by its items (idempotent)."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.responses import DynamoHandler

    from atf_local.transaction_journal import journaled

    # Every call reaches the backend through the handler: the server's direct path and moto's own
    # (tests/functional/test_direct_calls.py), and in-process mock_aws. One lock there covers them all.
    if not getattr(DynamoDBBackend.transact_write_items, "_atf_journaled", False):
        DynamoDBBackend.transact_write_items = journaled(DynamoDBBackend.transact_write_items)  # type: ignore[method-assign]
    if not getattr(DynamoHandler.call_action, "_atf_locked", False):
        DynamoHandler.call_action = _locked(DynamoHandler.call_action, threading.RLock())  # type: ignore[method-assign]


def _locked(method: Callable[..., Any], lock: threading.RLock) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        with lock:
            return method(*args, **kwargs)

    call._atf_locked = True  # type: ignore[attr-defined]
    return call
