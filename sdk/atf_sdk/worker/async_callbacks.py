"""`async def` callbacks: awaited on the executor thread that runs them.

An executor thread runs one task at a time and its heartbeats come from a thread
of their own, so an async callback needs no shared event loop: each executor
thread keeps one (an asyncio.Runner) for all the tasks it runs, so that what a
callback caches on its loop (an aiohttp session, an async client) outlives one
task, as it would in an asyncio service. A sync callback never touches it.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable
from typing import Any

_threads = threading.local()


def completed(result: Any) -> Any:
    """The callback's result, once awaited if the callback was `async def` (or returned an awaitable)."""
    if not inspect.isawaitable(result):
        return result
    runner: asyncio.Runner | None = getattr(_threads, "runner", None)
    if runner is None:
        runner = _threads.runner = asyncio.Runner()
    return runner.run(_awaited(result))


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable
