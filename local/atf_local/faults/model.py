"""What one run left behind, read back: executions, state writes, process lives.

The history is JSON lines from every process (atf_local.instruments: the
callbacks' starts and ends, the state writes seen on the wire, the fault
hooks; and the harness's own records); the final snapshot is the table as the harness found it
once the run was over. All times are time.time() on one machine, so records
of different processes compare directly (the clock offsets the scenarios
inject touch only the task timestamps the framework writes, never these).
"""

from __future__ import annotations

import json
import signal
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Record = dict[str, Any]
Interval = tuple[float, float]


@dataclass(frozen=True)
class FinalTask:
    """A task as the table held it at the end: status, attempt, and whether it is still in the index."""

    id: str
    lambda_name: str
    status: str
    attempt: int
    max_attempts: int
    indexed: bool

    @classmethod
    def of(cls, raw: dict[str, Any]) -> FinalTask:
        return cls(
            raw["id"], raw["lambda"], raw["status"], int(raw["attempt"]), int(raw["max_attempts"]), bool(raw["indexed"])
        )


@dataclass
class Execution:
    task: str
    attempt: int
    pid: int
    start: float
    end: float | None = None  # the "end" record, if the execution got to write one
    result_applied: bool = False  # its own result write (succeed / fail_*) was applied


@dataclass
class Lives:
    """When each process died and when it was paused, as far as anyone recorded it."""

    deaths: dict[int, float] = field(default_factory=dict)
    pauses: dict[int, list[Interval]] = field(default_factory=lambda: defaultdict(list))
    run_end: float = 0.0

    def death_of(self, pid: int) -> float:
        """The latest moment the process can have been alive (the run's end if it outlived it)."""
        return self.deaths.get(pid, self.run_end)


RESULT_TRANSITIONS = frozenset({"succeed", "fail_retriable", "fail_fatal", "fail_to_dead_letter"})
STOP, CONT, KILL = int(signal.SIGSTOP), int(signal.SIGCONT), int(signal.SIGKILL)


def load_records(directory: Path, pattern: str = "*.jsonl") -> list[Record]:
    """Every history record of the files matching `pattern`, oldest first."""
    records: list[Record] = []
    for path in sorted(directory.glob(pattern)):
        for line in path.read_text(errors="replace").splitlines():
            if line.strip():
                try:
                    records.append(json.loads(line))
                except ValueError:
                    continue  # a line cut short by a kill -9: the process died mid-write
    records.sort(key=lambda r: float(r.get("t", 0.0)))
    return records


def load_final(path: Path) -> dict[str, FinalTask]:
    raw = json.loads(path.read_text())
    return {t["id"]: FinalTask.of(t) for t in raw["tasks"]}


def of_kind(records: Iterable[Record], *kinds: str) -> list[Record]:
    return [r for r in records if r.get("kind") in kinds]


def executions(records: list[Record]) -> list[Execution]:
    """Every execution that started, with its end and whether its own result landed."""
    found: dict[tuple[str, int, int], Execution] = {}
    for record in of_kind(records, "start", "end"):
        key = (record["task"], int(record["attempt"]), int(record["pid"]))
        if record["kind"] == "start":
            found[key] = Execution(key[0], key[1], key[2], float(record["t"]))
        elif key in found:
            found[key].end = float(record["t"])
    for write in of_kind(records, "write"):
        key = (write["task"], int(write.get("attempt") or 0), int(write["pid"]))
        if key in found and write["transition"] in RESULT_TRANSITIONS and write["result"] == "applied":
            found[key].result_applied = True
    return list(found.values())


def lives(records: list[Record], run_end: float) -> Lives:
    """Deaths and pauses. A death is taken at the latest time it can have happened:
    the monitor's detection of a vanished process, else an exit or kill record."""
    result = Lives(run_end=run_end)
    stopped: dict[int, float] = {}
    for record in records:
        pid, t = record.get("pid"), float(record.get("t", 0.0))
        if record.get("kind") == "proc" and record.get("event") == "gone":
            result.deaths[int(record["target"])] = t
        elif record.get("kind") == "exit" and pid is not None:
            result.deaths.setdefault(int(pid), t)
        elif record.get("kind") == "signal":
            _signal(result, stopped, int(record["target"]), int(record["sig"]), t)
    for pid, since in stopped.items():
        result.pauses[pid].append((since, result.death_of(pid)))
    return result


def _signal(result: Lives, stopped: dict[int, float], pid: int, sig: int, t: float) -> None:
    if sig == STOP:
        stopped.setdefault(pid, t)
    elif sig == CONT and pid in stopped:
        result.pauses[pid].append((stopped.pop(pid), t))
    elif sig == KILL:
        result.deaths.setdefault(pid, t)
        if pid in stopped:
            result.pauses[pid].append((stopped.pop(pid), t))


def active_intervals(execution: Execution, life: Lives) -> list[Interval]:
    """When an execution can have been running: from its start to its end (or its
    process's death), less the times its process was paused."""
    death = life.death_of(execution.pid)
    end = min(execution.end, death) if execution.end is not None else death
    spans: list[Interval] = [(execution.start, max(execution.start, end))]
    for pause in sorted(life.pauses.get(execution.pid, [])):
        spans = [piece for span in spans for piece in _minus(span, pause)]
    return spans


def _minus(span: Interval, cut: Interval) -> list[Interval]:
    (a, b), (c, d) = span, cut
    if d <= a or c >= b:
        return [span]
    return [p for p in ((a, c), (d, b)) if p[1] > p[0]]


def overlap_s(left: list[Interval], right: list[Interval]) -> float:
    return sum(max(0.0, min(b, d) - max(a, c)) for a, b in left for c, d in right)
