"""A history of what happened, for the fault-injection checker and the benchmarks.

JSON lines in ATF_HISTORY_DIR, one file per recording source and process
(`<source>-<pid>.jsonl`): the harness's own records, each callback's start and
end (atf_local.instruments.executions), each state write and send seen on the
wire (atf_local.instruments.wire), each injected fault (atf_local.instruments.faults).
Every record carries its kind, the wall-clock time, the host and the pid.
Without a directory nothing is recorded and a recorder costs nothing.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import time
from pathlib import Path
from typing import Any, TextIO

from atf_local.instruments.per_process import PerProcess

HISTORY_ENV = "ATF_HISTORY_DIR"


class History:
    """One source's records in one process; its file is opened by the first record.

    A History may be made before its process forks: a worker host's executors fork from a server that ran the
    start-up hook (atf_local.instruments.startup), so the wire recorder they share was made there. Each record
    therefore reads the pid as it is written, and a process records into a file of its own, never its parent's
    (atf_local.instruments.per_process)."""

    def __init__(self, directory: Path | None, component: str) -> None:
        # Built from a function, not a method: a History no cycle holds closes its file as soon as it is dropped.
        self._file = None if directory is None else PerProcess(functools.partial(_open, directory, component))
        self._base = {"component": component, "host": socket.gethostname()}

    @property
    def enabled(self) -> bool:
        return self._file is not None

    def record(self, kind: str, **fields: Any) -> None:
        if self._file is None:
            return
        line = json.dumps({"kind": kind, "t": time.time(), **self._base, "pid": os.getpid(), **fields}, default=str)
        with self._file.hold() as file:  # one record at a time: the lines of two threads never interleave
            file.write(line + "\n")

    @classmethod
    def from_env(cls, component: str) -> History:
        directory = os.environ.get(HISTORY_ENV)
        return cls(Path(directory) if directory else None, component)


def _open(directory: Path, component: str) -> TextIO:
    """The file of this process, opened by its first record."""
    directory.mkdir(parents=True, exist_ok=True)
    return (directory / f"{component}-{os.getpid()}.jsonl").open("a", buffering=1)
