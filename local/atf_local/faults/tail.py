"""Reads the executors' history as it grows, so the harness can aim a fault at
an executor that is running a task right now.

An execution counts as running from its callback's start until both its end and
its own result write (applied, refused or failed) are recorded: an executor
still reporting a result is busy, and a fault aimed at it lands mid-report."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path

from atf_local.faults.model import RESULT_TRANSITIONS

ExecKey = tuple[str, int]  # (task id, attempt)


@dataclass
class HistoryTail:
    directory: Path
    _offsets: dict[Path, int] = field(default_factory=dict)
    open: dict[ExecKey, int] = field(default_factory=dict)  # running executions -> pid
    ended: set[ExecKey] = field(default_factory=set)
    started: set[ExecKey] = field(default_factory=set)
    faulted: dict[int, list[str]] = field(default_factory=dict)  # pid -> "kind:target" of its injected faults
    _closing: dict[ExecKey, set[str]] = field(default_factory=dict)  # what has been seen of an execution's end
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def refresh(self) -> None:
        with self._lock:
            for pattern in ("executor-*.jsonl", "wire-*.jsonl", "faults-*.jsonl"):
                for path in sorted(self.directory.glob(pattern)):
                    self._read(path)

    def _read(self, path: Path) -> None:
        with path.open("rb") as handle:
            handle.seek(self._offsets.get(path, 0))
            chunk = handle.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written waits for the next look
        self._offsets[path] = self._offsets.get(path, 0) + len(complete)
        for line in complete.decode(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            key = (str(record.get("task")), int(record.get("attempt") or 0))
            kind = record.get("kind")
            if kind == "fault":
                self.faulted.setdefault(int(record["pid"]), []).append(f"{record['fault']}:{record.get('target')}")
            elif kind == "start":
                self.open[key] = int(record["pid"])
                self.started.add(key)
            elif kind == "end":
                self.ended.add(key)
                self._close(key, "end")
            elif kind == "write" and record.get("transition") in RESULT_TRANSITIONS:
                self._close(key, "result")

    def _close(self, key: ExecKey, seen: str) -> None:
        closing = self._closing.setdefault(key, set())
        closing.add(seen)
        if closing == {"end", "result"}:
            self.open.pop(key, None)

    def busy_pids(self, among: list[int]) -> dict[int, list[ExecKey]]:
        """Executors among `among` with an execution under way (as far as the history says)."""
        self.refresh()
        alive = set(among)
        busy: dict[int, list[ExecKey]] = {}
        for key, pid in self.open.items():
            if pid in alive:
                busy.setdefault(pid, []).append(key)
        return busy

    def pids_with_fault(self, fault: str) -> list[int]:
        """Processes in which a fault ("kind:target") has fired."""
        self.refresh()
        return sorted(pid for pid, seen in self.faulted.items() if fault in seen)

    def rerun_ended(self, key: ExecKey) -> bool:
        """Whether a later attempt of this task has run to its end."""
        self.refresh()
        task, attempt = key
        return any(t == task and a > attempt for t, a in self.ended)
