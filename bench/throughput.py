"""Throughput: no-op tasks due now, sent as fast as the API takes them; tasks/s end to end,
then the embedded backend's ceiling for the same calls per task on the same server."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from atf_local.environment import sqs_endpoint_of
from atf_local.faults.model import load_records
from atf_sdk.client import AtfClient
from bench import raw
from bench.common import LAMBDA, Window, per_task_calls, spent, sqs_by_call, wait_for_ends, warm_up
from bench.machine import load_average
from bench.procs import Stack, bench_config, running


def submit(client: AtfClient, tasks: int) -> tuple[list[str], list[tuple[float, int]]]:
    """Batches of 100 due now; (time, tasks accepted so far) after each batch."""
    ids: list[str] = []
    timeline = [(time.time(), 0)]
    for start in range(0, tasks, 100):
        batch = [{"lambda": LAMBDA, "payload": {}} for _ in range(min(100, tasks - start))]
        ids += [r.task.id for r in client.schedule_many(batch) if r.task is not None]
        timeline.append((time.time(), len(ids)))
    return ids, timeline


def run_throughput(
    workdir: Path,
    tasks: int = 2000,
    raw_processes: tuple[int, ...] = (2, 4),
    raw_seconds: float = 20,
    peer_tasks: int = 0,
    **stack_kw: Any,
) -> dict[str, Any]:
    """The framework's run; then, with `peer_tasks`, Celery's on the same SQS server (bench.celery_peer);
    then the raw loop's ceiling."""
    stack = Stack(bench_config(), workdir, **stack_kw)
    with running(stack), AtfClient(stack.api_url) as client:
        warm_up(stack, client)
        before = Window.take(stack, settle_s=2.0)
        ids, submitted = submit(client, tasks)
        done = wait_for_ends(stack, ids, timeout_s=600)
        after = Window.take(stack)
        cpu, bill = spent(before, after)
        mix = per_task_calls(bill, len(ids))
        _stop_framework(stack)
        peer = _peer(sqs_endpoint_of(stack.endpoint) or stack.endpoint, workdir / "celery", peer_tasks)
        latencies = {}
        if raw_processes:  # per-call costs on the table the run left, then on an empty one
            latencies["after the run (table of the run)"] = raw.call_latencies(stack.endpoint, stack.config)
            empty = raw.fresh(stack.endpoint, stack.config, "probe")
            latencies["empty table"] = raw.call_latencies(stack.endpoint, empty)
        ceilings = {n: raw.ceiling(stack.endpoint, stack.config, mix, n, raw_seconds) for n in raw_processes}
    first, last_end = submitted[0][0], max(t["end"] for t in done.values())
    rate = len(done) / (last_end - first)
    steady = steady_rate(sorted(t["end"] for t in done.values()))
    best = max(ceilings.values(), default=0.0)
    return {
        "tasks": len(ids),
        "completed": len(done),
        "seconds": last_end - first,
        "tasks_per_s": rate,
        "scheduling_per_s": len(ids) / (submitted[-1][0] - first),
        "ceiling_per_s": ceilings,
        # The raw loop runs flat out from a synchronised start: its counterpart is the pipeline's
        # steady rate, not one that includes filling and draining it. Both are reported.
        "steady_per_s": steady,
        "ratio": steady / best if best else None,
        "ratio_whole_run": rate / best if best else None,
        "cpu_s_per_task": {k: v / max(1, len(ids)) for k, v in cpu.items()},
        "calls_per_task": mix,
        "call_ms": latencies,
        "sqs_per_task": sqs_by_call(bill, len(ids)),
        "sqs_requests_per_task": bill.sqs_requests / max(1, len(ids)),
        "submitted": [(t - first, n) for t, n in submitted],
        "completed_at": sorted(t["end"] - first for t in done.values()),
        "started_at": sorted(t["start"] - first for t in done.values() if "start" in t),
        "consumer_polls": consumer_polls(stack.history_dir),
        "stack": {"executors": stack.executors, "threads": stack.threads, "receive_wait": stack.receive_wait},
        "load": load_average(),
        "celery": peer,
    }


def steady_rate(ends: list[float], low: float = 0.1, high: float = 0.9) -> float:
    """Tasks/s between the 10th and the 90th percentile of completions: the pipeline once full."""
    first, last = int(low * len(ends)), int(high * len(ends)) - 1
    if last <= first or ends[last] <= ends[first]:
        return 0.0
    return (last - first) / (ends[last] - ends[first])


def consumer_polls(history_dir: Path, gap_s: float = 0.5) -> dict[str, Any]:
    """The consumer's polls as its history shows them: runs of sends (or, with record_enqueued, of
    enqueue writes) with no gap over gap_s."""
    times: list[float] = []
    rejected = 0  # enqueue writes that found the task already further on: each is billed a write unit
    for record in load_records(history_dir, "wire-*.jsonl"):  # only consumers send or enqueue
        if record.get("kind") == "sent":
            times.append(record["t"])
        elif record.get("transition") == "enqueue":
            if record.get("result") == "applied":
                times.append(record["t"])
            else:
                rejected += 1
    times.sort()
    polls: list[list[float]] = []
    for moment in times:
        if polls and moment - polls[-1][-1] <= gap_s:
            polls[-1].append(moment)
        else:
            polls.append([moment])
    if not polls:
        return {"polls": 0, "rejected_enqueues": rejected}
    spans = [poll[-1] - poll[0] for poll in polls]
    return {
        "polls": len(polls),
        "rejected_enqueues": rejected,
        "max_tasks": max(len(poll) for poll in polls),
        "max_seconds": max(spans),
        "seconds_per_task": sum(spans) / max(1, sum(len(poll) - 1 for poll in polls)),
    }


def _peer(sqs_endpoint: str, workdir: Path, tasks: int) -> dict[str, Any]:
    """Celery's pools on the same SQS server (Celery is the benchmark's requirement: imported only here)."""
    if not tasks:
        return {}
    from bench.celery_peer import run_peer

    return run_peer(sqs_endpoint, workdir, tasks)


def _stop_framework(stack: Stack) -> None:
    """Leave moto's server alone for the raw loop: stop the host, the API and the consumer."""
    consumers = stack.components()["consumer"]
    stack.stop(("host", "frontend"))
    for pid in consumers:  # the consumer is a child of the stack process, which keeps moto running
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
    time.sleep(2.0)
