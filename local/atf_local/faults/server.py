"""The embedded AWS for the guarantees suite: the local stack (moto's server on
loopback, the table and queues), with DynamoDB's atomic conditional writes.

moto checks a write's condition and then applies it in separate Python steps,
with no lock, and its server answers requests on many threads: two writes on
one item can both pass their conditions. A heartbeat in flight as its task's
result lands then turns a finished task back into a running one, which
DynamoDB, where a conditional write is atomic per item, never does. The suite
tests the framework, not moto, so here DynamoDB's writes run one at a time.
Reads are left free: a read that overlaps a write may see part of it, as a
reader of an item being written never does on DynamoDB, but every decision
the framework takes on a read is itself a conditional write.

    python -m atf_local.faults.server --config stack.json --aws-port 4566
"""

from __future__ import annotations

import argparse
import functools
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from atf_core.config import StackConfig
from atf_local.stack import LocalStack

_WRITES = ("put_item", "update_item", "delete_item", "transact_write_items")


def atomic_dynamodb() -> None:
    """Serialise moto's DynamoDB writes, as DynamoDB serialises the writes on one item."""
    from moto.dynamodb.models import DynamoDBBackend

    lock = threading.RLock()
    for name in _WRITES:
        original = getattr(DynamoDBBackend, name)
        if not getattr(original, "_atf_locked", False):
            setattr(DynamoDBBackend, name, _locked(original, lock))


def _locked(method: Callable[..., Any], lock: threading.RLock) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        with lock:
            return method(*args, **kwargs)

    call._atf_locked = True  # type: ignore[attr-defined]
    return call


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m atf_local.faults.server", description=__doc__)
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--aws-port", type=int, required=True)
    args = parser.parse_args(argv)
    atomic_dynamodb()
    stack = LocalStack(StackConfig.from_file(args.config), aws_port=args.aws_port, consumers=0, api_port=None)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    signal.signal(signal.SIGINT, lambda *_: stopped.set())
    stack.start(with_consumer=False)
    print(f"embedded AWS ready on {stack.endpoint}", flush=True)
    stopped.wait()
    stack.stop()


if __name__ == "__main__":
    main()
