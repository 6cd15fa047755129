"""A value that belongs to the process that built it, built again in a forked child.

The instruments attach to processes through a start-up hook, and a worker host's executors fork from a server that
ran it: an instrument made there is shared by every executor, but what it writes to (a file named by the pid, a
writer thread) must be each process's own. A thread alive in the parent is not in the child, and a lock it held
as the process forked stays held there for ever, so the lock is replaced in the child before any of its code runs.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class PerProcess(Generic[T]):
    """`factory()`, called on first use in each process; its calls and the holders of `hold` take turns."""

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._built: tuple[int, T] | None = None  # the pid of the process that built the value, and the value
        self._lock = threading.Lock()
        _made.add(self)

    @contextmanager
    def hold(self) -> Iterator[T]:
        """This process's value, which no other thread of it uses through `hold` or `get` until the block ends."""
        pid = os.getpid()
        with self._lock:
            if self._built is None or self._built[0] != pid:
                self._built = (pid, self._factory())
            yield self._built[1]

    def get(self) -> T:
        with self.hold() as value:
            return value


_made: weakref.WeakSet[PerProcess[Any]] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for slot in list(_made):
        slot._lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
