"""Start-lag: tasks due at a steady rate, each scheduled a few seconds ahead; when did each start?

start-lag = the callback's "start" record (wall time, ATF_HISTORY_DIR) minus the
task's run_at as stored. Same machine, same clock.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from atf_core.telemetry import percentile
from atf_sdk.client import AtfClient
from bench.common import (
    LAMBDA,
    Window,
    per_task_calls,
    slow_tail,
    spent,
    sqs_by_call,
    summary,
    wait_for_ends,
    warm_up,
)
from bench.machine import load_average
from bench.procs import Stack, bench_config, running
from bench.throughput import consumer_polls


@dataclass
class Feed:
    run_at: dict[str, float] = field(default_factory=dict)  # task id -> epoch seconds
    late_submits: int = 0  # batches that went out after their first task was due
    submit_s: list[float] = field(default_factory=list)


def feed(client: AtfClient, rate: int, seconds: int, lead_s: float) -> Feed:
    """Each second, one batch of `rate` tasks due lead_s later, spread evenly over that second."""
    fed = Feed()
    start = time.time()
    for second in range(seconds):
        time.sleep(max(0.0, start + second - time.time()))
        base = start + lead_s + second
        due = [datetime.fromtimestamp(base + j / rate, UTC) for j in range(rate)]
        began = time.time()
        results = client.schedule_many([{"lambda": LAMBDA, "payload": {}, "run_at": d} for d in due])
        fed.submit_s.append(time.time() - began)
        fed.late_submits += time.time() > base
        for item in results:
            if item.task is not None:
                fed.run_at[item.task.id] = item.task.run_at.timestamp()
    return fed


def run_lag(
    workdir: Path, rate: int = 50, seconds: int = 60, lead_s: float = 5.0, lookahead: float = 1.0, **stack_kw: Any
) -> dict[str, Any]:
    stack = Stack(bench_config(lookahead=lookahead), workdir, **stack_kw)
    with running(stack), AtfClient(stack.api_url) as client:
        warm_up(stack, client)
        before = Window.take(stack)
        fed = feed(client, rate, seconds, lead_s)
        # Bounded: a backlog the backend cannot serve is reported as tasks not started in the window.
        done = wait_for_ends(stack, list(fed.run_at), timeout_s=lead_s + 30)
        after = Window.take(stack)
    cpu, bill = spent(before, after)
    by_task = {i: (t["start"] - fed.run_at[i]) * 1000 for i, t in done.items() if "start" in t}
    pairs = sorted((fed.run_at[i], lag) for i, lag in by_task.items())
    lags_ms = [lag for _, lag in pairs]
    tasks = len(fed.run_at)
    ran = max(1, len(lags_ms))  # per-task figures are per task that went through
    return {
        "rate": rate,
        "lookahead_s": lookahead,
        "seconds": seconds,
        "lead_s": lead_s,
        "scheduled": tasks,
        "started": len(lags_ms),
        "late_submits": fed.late_submits,
        "submit_s": {"p50": percentile(fed.submit_s, 0.5), "max": max(fed.submit_s)},
        "lag_ms": summary(lags_ms + [math.inf] * (tasks - len(lags_ms))),
        "lags_ms": lags_ms,
        "run_at_lags": pairs,
        "cpu_s_per_task": {k: v / ran for k, v in cpu.items()},
        "calls_per_task": per_task_calls(bill, ran),
        "sqs_per_task": sqs_by_call(bill, ran),
        "sqs_requests_per_task": bill.sqs_requests / ran,
        "consumer_polls": consumer_polls(stack.history_dir),
        "slowest_5_percent": slow_tail(stack.history_dir, fed.run_at, by_task),
        "window_s": after.at - before.at,
        "stack": {"executors": stack.executors, "threads": stack.threads, "receive_wait": stack.receive_wait},
        "load": load_average(),
    }
