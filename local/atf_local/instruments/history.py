"""A history of what happened, for the fault-injection checker and the benchmarks.

JSON lines in ATF_HISTORY_DIR, one file per recording source and process
(`<source>-<pid>.jsonl`): the harness's own records, each callback's start and
end (atf_local.instruments.executions), each state write and send seen on the
wire (atf_local.instruments.wire), each injected fault (atf_local.instruments.faults).
Every record carries its kind, the wall-clock time, the host and the pid.
Without a directory nothing is recorded and a recorder costs nothing.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import weakref
from pathlib import Path
from typing import Any, TextIO

HISTORY_ENV = "ATF_HISTORY_DIR"


class History:
    """One source's records in one process; its file is opened by the first record.

    A History may be made before its process forks: a worker host's executors fork from a server that ran the
    start-up hook (atf_local.instruments.startup), so the wire recorder they share was made there. Each record
    therefore reads the pid as it is written, and a process records into a file of its own, never its parent's."""

    def __init__(self, directory: Path | None, component: str) -> None:
        self._directory = directory
        self._component = component
        self._file: TextIO | None = None
        self._file_pid = 0  # the process whose file `_file` is
        self._lock = threading.Lock()
        self._base = {"component": component, "host": socket.gethostname()}
        _made.add(self)

    @property
    def enabled(self) -> bool:
        return self._directory is not None

    def record(self, kind: str, **fields: Any) -> None:
        if self._directory is None:
            return
        pid = os.getpid()
        line = json.dumps({"kind": kind, "t": time.time(), **self._base, "pid": pid, **fields}, default=str)
        with self._lock:
            if self._file is None or self._file_pid != pid:
                self._directory.mkdir(parents=True, exist_ok=True)
                self._file = (self._directory / f"{self._component}-{pid}.jsonl").open("a", buffering=1)
                self._file_pid = pid
            self._file.write(line + "\n")

    def _forked(self) -> None:
        """In the child of a fork: a lock that another thread of the parent held as it forked is never released
        here, and the child's first record would wait for it for ever."""
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, component: str) -> History:
        directory = os.environ.get(HISTORY_ENV)
        return cls(Path(directory) if directory else None, component)


_made: weakref.WeakSet[History] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for history in list(_made):
        history._forked()


os.register_at_fork(after_in_child=_after_fork_in_child)
