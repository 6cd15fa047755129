"""Fairness between flow keys: key A floods, keys B..K schedule a few tasks each, all due at one moment.

Two rounds on one stack: first B..K alone (the baseline), then the same with A's flood due at the same
moment. Reported: B..K's start-lag (the callback's start record minus the tasks' run_at) in each round,
its ratio (the issue's goal: within 2x), and A's throughput over its flood.
"""

from __future__ import annotations

import string
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from atf_sdk.client import AtfClient
from bench.common import LAMBDA, summary, wait_for_ends, warm_up
from bench.procs import Stack, bench_config, running

OTHER_KEYS = tuple(string.ascii_uppercase[1:11])  # B..K


def run_fairness(workdir: Path, flood: int = 5000, per_key: int = 20, shards: int = 8) -> dict[str, Any]:
    stack = Stack(bench_config(shards=shards), workdir)
    with running(stack), AtfClient(stack.api_url) as client:
        warm_up(stack, client)
        alone = _round(stack, client, flood=0, per_key=per_key, lead_s=10.0)
        # Every task must be in before the moment they are all due: the lead is sized by the rate the
        # local API took the baseline's tasks at, with room to spare.
        lead_s = 10.0 + 1.5 * (flood + per_key * len(OTHER_KEYS)) / alone["scheduled_per_s"]
        flooded = _round(stack, client, flood=flood, per_key=per_key, lead_s=lead_s)
    ratio = {
        q: flooded["others_lag_ms"][q] / alone["others_lag_ms"][q]
        for q in ("p50", "p95")
        if flooded["others_lag_ms"].get(q) is not None and alone["others_lag_ms"].get(q)
    }
    return {"flood": flood, "keys": len(OTHER_KEYS), "per_key": per_key, "shards": shards, "alone": alone,
            "flooded": flooded, "others_lag_ratio": ratio}  # fmt: skip


def _round(stack: Stack, client: AtfClient, flood: int, per_key: int, lead_s: float) -> dict[str, Any]:
    """A's flood (if any), then B..K's tasks, all due at one moment `lead_s` from now."""
    began = time.time()
    due = datetime.fromtimestamp(began + lead_s, UTC)
    a_ids = _schedule(client, ["A"] * flood, due)
    other_ids = _schedule(client, [k for k in OTHER_KEYS for _ in range(per_key)], due)
    scheduled_at = time.time()
    done = wait_for_ends(stack, a_ids + other_ids, timeout_s=lead_s + 120 + flood / 10)
    due_s = due.timestamp()
    others = [(done[i]["start"] - due_s) * 1000 if "start" in done.get(i, {}) else float("inf") for i in other_ids]
    a_ends = [done[i]["end"] for i in a_ids if "end" in done.get(i, {})]
    a_rate = len(a_ends) / max(1e-3, max(a_ends) - due_s) if a_ends else None
    return {"lead_s": round(lead_s, 1), "scheduled_late": scheduled_at > due_s,
            "scheduled_per_s": (len(a_ids) + len(other_ids)) / max(1e-3, scheduled_at - began),
            "others_lag_ms": summary(others), "a_done": len(a_ends), "a_tasks_per_s": a_rate}  # fmt: skip


def _schedule(client: AtfClient, keys: list[str], due: datetime) -> list[str]:
    requests = [{"lambda": LAMBDA, "payload": {}, "run_at": due, "flow_key": k} for k in keys]
    return [r.task.id for r in client.schedule_many(requests) if r.task is not None]
