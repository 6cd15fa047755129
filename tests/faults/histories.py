"""Hand-made histories for the checker's tests: one clean run, and helpers to spoil it."""

from __future__ import annotations

import dataclasses
import json
import signal
from pathlib import Path
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


def up(pid: int, t: float, role: str = "executor", name: str = "host-a") -> Record:
    return {"kind": "proc", "event": "up", "t": t, "pid": HARNESS, "target": pid, "role": role, "name": name}


def gone(pid: int, t: float, role: str = "executor", name: str = "host-a", code: int | None = None) -> Record:
    return {
        "kind": "proc", "event": "gone", "t": t, "pid": HARNESS, "target": pid, "role": role, "name": name,
        "code": code,
    }  # fmt: skip


def fault(kind: str, client: str, t: float, pid: int = EXECUTOR) -> Record:
    """A fault the hooks injected into a call of `client` (an AwsClients field)."""
    service = "sqs" if client.startswith("sqs") else "dynamodb"
    return {"kind": "fault", "t": t, "pid": pid, "fault": kind, "service": service, "client": client}


def phase(name: str, t: float) -> Record:
    return {"kind": "phase", "t": t, "pid": HARNESS, "name": name}


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


def rerun(task: str, t: float, pid: int = OTHER_EXECUTOR) -> list[Record]:
    """Attempt 2 of a task, claimed at `t` and run to success by `pid`."""
    return [
        claim(task, 2, t),
        start(task, 2, t + 0.1, pid=pid),
        write(task, "succeed", 2, "applied", "success", 2, t + 0.5, pid=pid),
        end(task, 2, t + 0.6, pid=pid),
    ]


def killed(kills: int) -> tuple[list[Record], dict[str, FinalTask]]:
    """Scenario 1's fault landed: `kills` executors killed -9 mid-task, each task run again elsewhere."""
    history: list[Record] = []
    for i in range(kills):
        task, pid = f"k{i}", EXECUTOR + i
        history += [*clean_run(task)[:4], sent(pid, signal.SIGKILL, T0 + 2), gone(pid, T0 + 2.1)]
        history += rerun(task, T0 + 14)
    return history, {f"k{i}": FinalTask(f"k{i}", "steady", "success", 2, 5, False) for i in range(kills)}


def paused() -> list[Record]:
    """Scenario 2's fault landed: the executor stopped mid-report; its result, sent after SIGCONT, refused."""
    return [
        *clean_run()[:5],
        sent(EXECUTOR, signal.SIGSTOP, T0 + 2.5),
        *rerun("a", T0 + 14),
        sent(EXECUTOR, signal.SIGCONT, T0 + 30),
        write("a", "succeed", 1, "rejected", "success", 2, T0 + 30.2),
        end("a", 1, T0 + 30.3),
    ]


def partitioned() -> list[Record]:
    """Scenario 8's fault landed: host-a cut off mid-task, its executor gone, the task run again by host-b."""
    return [
        up(EXECUTOR, T0),
        *clean_run()[:5],
        phase("armed partition", T0 + 2.5),
        gone(EXECUTOR, T0 + 11),
        *rerun("a", T0 + 14),
        phase("disarmed partition", T0 + 15),
    ]


def drained(hosts: dict[int, str]) -> list[Record]:
    """Scenario 11's fault landed: each host (pid -> name) sent SIGTERM drained and exited 0."""
    history = clean_run()
    for pid, name in hosts.items():
        history += [up(pid, T0, "host", name), sent(pid, signal.SIGTERM, T0 + 3), gone(pid, T0 + 4, "host", name, 0)]
    return history


def write_run(run_dir: Path, records: list[Record], tasks: dict[str, FinalTask]) -> Path:
    """A run directory as the harness leaves one: the history and the final table."""
    (run_dir / "history").mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps(r) + "\n" for r in records)
    (run_dir / "history" / "harness-1.jsonl").write_text(lines)
    rows = [{**dataclasses.asdict(t), "lambda": t.lambda_name} for t in tasks.values()]
    (run_dir / "final.json").write_text(json.dumps({"t": T0 + 60, "tasks": rows}))
    return run_dir


def bounds(**overrides: Any) -> Bounds:
    values: dict[str, Any] = {"healed_t": T0 + 3, "drained_t": T0 + 4, "ended_t": T0 + 60, "drain_bound_s": 30}
    return Bounds(**{**values, **overrides})
