"""Overlapping a poll's round trips: a bounded pool of threads that only do I/O.

A poll's decisions and every piece of its state (the in-flight tracker, the
queue budget, the report) stay with the thread that polls; the pool's threads
only make calls on the shared boto3 clients, which are safe to call from
several threads, and hand the answers back. So the consumer decides exactly
as a sequential one would, in the same order; what overlaps is the waiting:
the index queries of a queue's shards, the batch read of the next tasks, the
sends of the batches before.

With one thread nothing runs in the background: every call is made where and
when it is asked for, as the sequential consumer did (the benchmark's "before").
"""

from __future__ import annotations

import contextvars
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from atf_core.config import StackConfig

T = TypeVar("T")

# Four overlapping round trips cut a poll's waiting on AWS about fourfold. More would crowd an endpoint
# that serves one call at a time: on the local stack (moto's server, one process) ten index queries at
# once on a 4,000-task table took longer than the clients' 2 s read timeout, where four did not. Within
# botocore's ten connections per client either way.
MAX_IO_THREADS = 4


def io_threads_for(config: StackConfig) -> int:
    """A thread per partition (two per shard) of the widest queue, up to MAX_IO_THREADS."""
    shards = max((config.shards_of(name) for name in config.lambdas), default=config.shards)
    return min(MAX_IO_THREADS, 2 * shards)


class Overlap:
    def __init__(self, threads: int) -> None:
        if threads < 1:
            raise ValueError(f"io_threads must be at least 1, not {threads}")
        self.threads = threads
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="atf-consumer-io") if threads > 1 else None

    def submit(self, call: Callable[[], T]) -> Future[T]:
        """Start a call; it runs at once, in this thread, when there is no pool."""
        if self._pool is None:
            done: Future[T] = Future()
            try:
                done.set_result(call())
            except Exception as error:  # noqa: BLE001 - raised by the future's result(), as from a thread
                done.set_exception(error)
            return done
        # The call's spans stay children of the poll's (OpenTelemetry's context is a contextvar).
        return self._pool.submit(contextvars.copy_context().run, call)

    def ordered(self, calls: Iterable[Callable[[], T]], ahead: int) -> Iterator[T]:
        """The calls' results in their order, with up to `ahead` of them under way; without a pool, each
        call is made only when its result is asked for. Calls not yet started when the reader stops are
        cancelled."""
        if self._pool is None:
            yield from (call() for call in calls)
            return
        pending: deque[Future[T]] = deque()
        try:
            for call in calls:
                pending.append(self.submit(call))
                if len(pending) >= ahead:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
