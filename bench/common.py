"""What the start-lag and throughput benchmarks share: warm-up, history, metered windows."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from atf_core.telemetry import percentile
from atf_local.cost.billing import Bill
from atf_local.faults.model import load_records
from atf_sdk.client import AtfClient
from bench.procs import Stack

LAMBDA = "noop"


@dataclass
class Window:
    """CPU seconds per component and the summed bills of every metered process, at one moment."""

    at: float
    cpu: dict[str, float]
    bill: Bill

    @classmethod
    def take(cls, stack: Stack, settle_s: float = 1.0) -> Window:
        time.sleep(settle_s)  # every process dumps its bill twice a second
        bill = Bill()
        for snapshot in stack.bills().values():
            bill = bill + Bill.from_dict(snapshot["bill"])
        return cls(time.time(), stack.cpu(), bill)


def spent(start: Window, end: Window) -> tuple[dict[str, float], Bill]:
    cpu = {name: end.cpu.get(name, 0.0) - start.cpu.get(name, 0.0) for name in end.cpu}
    return cpu, end.bill - start.bill


def executions(history_dir: Path, kinds: Iterable[str] = ("start", "end")) -> dict[str, dict[str, float]]:
    """The first time each task's callback started and ended, by task id."""
    wanted = set(kinds)
    found: dict[str, dict[str, float]] = {}
    for record in load_records(history_dir, "executor-*.jsonl"):
        if record.get("kind") in wanted:
            found.setdefault(record["task"], {}).setdefault(record["kind"], record["t"])
    return found


def wait_for_ends(stack: Stack, task_ids: Sequence[str], timeout_s: float) -> dict[str, dict[str, float]]:
    deadline = time.monotonic() + timeout_s
    wanted = set(task_ids)
    while True:
        found = executions(stack.history_dir)
        if all("end" in found.get(i, {}) for i in wanted) or time.monotonic() > deadline:
            return {i: found[i] for i in wanted if i in found}
        time.sleep(0.5)


def warm_up(stack: Stack, client: AtfClient, tasks: int = 20) -> None:
    """A few tasks through every component first: imports, connections, queue URLs."""
    results = client.schedule_many([{"lambda": LAMBDA, "payload": {}} for _ in range(tasks)])
    ids = [r.task.id for r in results if r.task is not None]
    done = wait_for_ends(stack, ids, timeout_s=120)
    if len(done) < len(ids):
        raise RuntimeError(f"warm-up: only {len(done)} of {len(ids)} tasks ran; see {stack.workdir}/*.log")


def per_task_calls(bill: Bill, tasks: int) -> dict[str, float]:
    """Calls per task by API, failed conditional writes counted with their call."""
    calls: dict[str, float] = {}
    for name, count in bill.calls.items():
        key = name.rstrip("!")
        calls[key] = calls.get(key, 0.0) + count / max(1, tasks)
    return dict(sorted(calls.items()))


def sqs_by_call(bill: Bill, tasks: int) -> dict[str, float]:
    return {k.split("/")[0]: v / max(1, tasks) for k, v in sorted(bill.detail.items()) if k.endswith("/sqs_requests")}


def summary(values: Sequence[float]) -> dict[str, Any]:
    """Percentiles; a value of inf (a task that never started in the window) makes them None."""
    if not values:
        return {"n": 0}

    def finite(value: float) -> float | None:
        return value if math.isfinite(value) else None

    return {
        "n": len(values),
        "not_started": sum(1 for v in values if not math.isfinite(v)),
        "p50": finite(percentile(values, 0.50)),
        "p95": finite(percentile(values, 0.95)),
        "p99": finite(percentile(values, 0.99)),
        "max": finite(max(values)),
        "min": finite(min(values)),
    }


def stage_times(history_dir: Path) -> dict[str, dict[str, float]]:
    """When each task was first sent (consumer), received and claimed (controller) and started (executor).
    A consumer that records enqueued writes before it sends: its write stands for the send."""
    found: dict[str, dict[str, float]] = {}
    for record in load_records(history_dir):
        stage = record.get("transition") if record.get("kind") == "write" else record.get("kind")
        stage = "sent" if stage == "enqueue" else stage
        applied = record.get("result", "applied") == "applied"
        if stage in ("sent", "received", "claim", "start") and applied:
            found.setdefault(record["task"], {}).setdefault(stage, record["t"])
    return found


def slow_tail(history_dir: Path, run_at: dict[str, float], lags_ms: dict[str, float]) -> dict[str, float]:
    """Where the slowest 5% of starts spent their time (medians, ms): how early the consumer sent the
    task (negative: before run_at), from the later of run_at and that send to the receive and to the claim,
    claim to start."""
    if not lags_ms:
        return {}
    cutoff = percentile(lags_ms.values(), 0.95)
    stages = stage_times(history_dir)
    rows = [(stages[i], run_at[i]) for i, lag in lags_ms.items() if lag >= cutoff and {"sent", "received", "claim",
            "start"} <= stages.get(i, {}).keys()]  # fmt: skip
    if not rows:
        return {}

    def median(values: list[float]) -> float:
        return percentile(values, 0.5) * 1000

    return {
        "tasks": len(rows),
        "sent_minus_run_at_ms": median([s["sent"] - due for s, due in rows]),
        "received_after_due_and_send_ms": median([s["received"] - max(due, s["sent"]) for s, due in rows]),
        "claim_after_due_and_send_ms": median([s["claim"] - max(due, s["sent"]) for s, due in rows]),
        "start_minus_claim_ms": median([s["start"] - s["claim"] for s, due in rows]),
    }
