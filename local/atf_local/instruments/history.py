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
from pathlib import Path
from typing import Any, TextIO

HISTORY_ENV = "ATF_HISTORY_DIR"


class History:
    """One source's records in one process; its file is opened by the first record."""

    def __init__(self, directory: Path | None, component: str) -> None:
        self._directory = directory
        self._component = component
        self._file: TextIO | None = None
        self._lock = threading.Lock()
        self._base = {"component": component, "host": socket.gethostname(), "pid": os.getpid()}

    @property
    def enabled(self) -> bool:
        return self._directory is not None

    def record(self, kind: str, **fields: Any) -> None:
        if self._directory is None:
            return
        line = json.dumps({"kind": kind, "t": time.time(), **self._base, **fields}, default=str)
        with self._lock:
            if self._file is None:
                self._directory.mkdir(parents=True, exist_ok=True)
                self._file = (self._directory / f"{self._component}-{os.getpid()}.jsonl").open("a", buffering=1)
            self._file.write(line + "\n")

    @classmethod
    def from_env(cls, component: str) -> History:
        directory = os.environ.get(HISTORY_ENV)
        return cls(Path(directory) if directory else None, component)
