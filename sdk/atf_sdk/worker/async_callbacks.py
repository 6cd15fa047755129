"""`async def` callbacks: awaited on the executor thread that runs them.

An executor thread runs one task at a time and its heartbeats come from a thread
of their own, so an async callback needs no shared event loop: each executor
thread keeps one (an asyncio.Runner) for all the tasks it runs, so that what a
callback caches on its loop (an aiohttp session, an async client) outlives one
task, as it would in an asyncio service. A sync callback never touches it.

An attempt with a time limit is cancelled at that limit and fails with a TaskTimeout
(atf_sdk.worker.time_limits); a coroutine that goes on running once cancelled is
stopped with its process.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable
from typing import Any

from atf_sdk.worker.time_limits import TaskTimeout

_threads = threading.local()


def completed(result: Any, limit_s: float | None = None) -> Any:
    """The callback's result, once awaited if the callback was `async def` (or returned an awaitable):
    cancelled after `limit_s` seconds (TaskTimeout), if given."""
    if not inspect.isawaitable(result):
        return result
    runner: asyncio.Runner | None = getattr(_threads, "runner", None)
    if runner is None:
        runner = _threads.runner = asyncio.Runner()
    return runner.run(_awaited(result, limit_s))


async def _awaited(awaitable: Awaitable[Any], limit_s: float | None) -> Any:
    if limit_s is None:
        return await awaitable
    scope = asyncio.timeout(limit_s)
    try:
        async with scope:
            result = await awaitable
    except TimeoutError:
        if scope.expired():  # our limit, not a TimeoutError the callback raised itself
            raise TaskTimeout(limit_s) from None
        raise
    if scope.expired():  # it swallowed its cancelling and returned: over its limit all the same
        raise TaskTimeout(limit_s)
    return result
