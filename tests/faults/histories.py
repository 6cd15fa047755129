"""Hand-made histories for the checker's tests: one clean run, and helpers to spoil it."""

from __future__ import annotations

import signal
from typing import Any

from atf_local.faults.checker import Bounds
from atf_local.faults.model import FinalTask, Record

T0 = 1_000.0
CONTROLLER, EXECUTOR, OTHER_EXECUTOR, HARNESS = 100, 200, 300, 1


def accepted(task: str, t: float = T0, lambda_name: str = "steady") -> Record:
    return {"kind": "accepted", "t": t, "pid": HARNESS, "task": task, "lambda": lambda_name, "scheduled_t": t}


def write(
    task: str, transition: str, attempt: int | None, result: str, status: str, current: int, t: float,
    pid: int = EXECUTOR, writer: str | None = None, reconciled: bool = False,
) -> Record:  # fmt: skip
    return {
        "kind": "write", "t": t, "pid": pid, "task": task, "transition": transition, "attempt": attempt,
        "writer": writer or f"{transition}-{task}-{attempt}-{pid}", "result": result, "reconciled": reconciled,
        "status": status, "current_attempt": current,
    }  # fmt: skip


def claim(task: str, attempt: int, t: float) -> Record:
    """A controller's claim that made `attempt` (the message carried attempt - 1)."""
    return write(task, "claim", attempt - 1, "applied", "claimed", attempt, t, pid=CONTROLLER)


def start(task: str, attempt: int, t: float, pid: int = EXECUTOR) -> Record:
    return {"kind": "start", "t": t, "pid": pid, "task": task, "attempt": attempt}


def end(task: str, attempt: int, t: float, pid: int = EXECUTOR) -> Record:
    return {"kind": "end", "t": t, "pid": pid, "task": task, "attempt": attempt}


def gone(pid: int, t: float, role: str = "executor") -> Record:
    return {"kind": "proc", "event": "gone", "t": t, "pid": HARNESS, "target": pid, "role": role, "name": "host-a"}


def sent(pid: int, sig: signal.Signals, t: float) -> Record:
    return {
        "kind": "signal", "t": t, "pid": HARNESS, "target": pid, "sig": int(sig), "name": sig.name, "injected": True,
    }  # fmt: skip


def final(task: str, status: str = "success", attempt: int = 1, indexed: bool = False) -> dict[str, FinalTask]:
    return {task: FinalTask(task, "steady", status, attempt, 5, indexed)}


def clean_run(task: str = "a") -> list[Record]:
    """Accepted, claimed, run once with a heartbeat, succeeded."""
    return [
        accepted(task),
        write(task, "enqueue", None, "applied", "enqueued", 0, T0 + 0.5, pid=50),
        claim(task, 1, T0 + 1.0),
        start(task, 1, T0 + 1.1),
        write(task, "heartbeat", 1, "applied", "processing", 1, T0 + 2.0),
        write(task, "succeed", 1, "applied", "success", 1, T0 + 2.5),
        end(task, 1, T0 + 2.6),
    ]


def bounds(**overrides: Any) -> Bounds:
    values: dict[str, Any] = {"healed_t": T0 + 3, "drained_t": T0 + 4, "ended_t": T0 + 60, "drain_bound_s": 30}
    return Bounds(**{**values, **overrides})
