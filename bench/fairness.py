"""Fairness between flow keys: key A floods, keys B..K schedule a few tasks each, all due at one moment.

Two rounds on one stack: first B..K alone (the baseline), then the same behind A's flood. In each round
the lambda is paused, every task is scheduled due at once (A's first, so its backlog is older than every
other key's task: the hardest order), and the pause is lifted: that moment is when all are due, however
long the local API took to take them. Reported: B..K's start-lag (the callback's start record minus that
moment) in each round, its ratio (the issue's goal: within 2x), and A's throughput over its flood.
"""

from __future__ import annotations

import math
import string
import time
from pathlib import Path
from typing import Any

from atf_core.store.codec import shard_of
from atf_core.telemetry import percentile
from atf_local.faults.model import load_records
from atf_sdk.client import AtfClient
from bench.common import LAMBDA, summary, wait_for_ends, warm_up
from bench.procs import Stack, bench_config, running

OTHER_KEYS = tuple(string.ascii_uppercase[1:11])  # B..K


def run_fairness(workdir: Path, flood: int = 5000, per_key: int = 20, shards: int = 8) -> dict[str, Any]:
    stack = Stack(bench_config(shards=shards), workdir)
    with running(stack), AtfClient(stack.api_url) as client:
        warm_up(stack, client)
        alone = _round(stack, client, flood=0, per_key=per_key)
        flooded = _round(stack, client, flood=flood, per_key=per_key)
    # The keys whose index shard is A's: only their tasks wait behind its flood, found by a read past it
    sharing = [k for k in OTHER_KEYS if shard_of("", shards, k) == shard_of("", shards, "A")]
    ratio = {
        q: flooded["others_lag_ms"][q] / alone["others_lag_ms"][q]
        for q in ("p50", "p95")
        if flooded["others_lag_ms"].get(q) is not None and alone["others_lag_ms"].get(q)
    }
    return {"flood": flood, "keys": len(OTHER_KEYS), "per_key": per_key, "shards": shards, "alone": alone,
            "flooded": flooded, "others_lag_ratio": ratio, "keys_in_a_shard": sharing}  # fmt: skip


def _round(stack: Stack, client: AtfClient, flood: int, per_key: int) -> dict[str, Any]:
    """A's flood (if any), then B..K's tasks, scheduled under a pause; all due when it is lifted."""
    client.pause(LAMBDA, reason="fairness benchmark: every task in before any is due")
    began = time.time()
    a_ids = [task for _, task in _schedule(client, ["A"] * flood)]
    keyed = _schedule(client, [k for k in OTHER_KEYS for _ in range(per_key)])
    other_ids = [task for _, task in keyed]
    scheduled_s = time.time() - began
    due_s = time.time()
    client.resume(LAMBDA)
    done = wait_for_ends(stack, a_ids + other_ids, timeout_s=120 + flood / 10)
    others = [(done[i]["start"] - due_s) * 1000 if "start" in done.get(i, {}) else float("inf") for i in other_ids]
    a_ends = [done[i]["end"] for i in a_ids if "end" in done.get(i, {})]
    a_rate = len(a_ends) / max(1e-3, max(a_ends) - due_s) if a_ends else None
    started_early = any(done[i].get("start", due_s) < due_s for i in done)
    rank = _send_ranks(stack, set(a_ids) | set(other_ids))
    ranks = [rank[task] for task in other_ids if task in rank]
    return {"scheduled_s": round(scheduled_s, 1), "started_early": started_early,
            "others_send_rank": {"p50": percentile(ranks, 0.5), "max": max(ranks)} if ranks else None,
            "scheduled_per_s": (len(a_ids) + len(other_ids)) / max(1e-3, scheduled_s),
            "others_lag_ms": summary(others), "a_done": len(a_ends), "a_tasks_per_s": a_rate,
            "by_key": _by_key(keyed, rank, dict(zip(other_ids, others, strict=True)))}  # fmt: skip


def _send_ranks(stack: Stack, round_ids: set[str]) -> dict[str, int]:
    """Where the consumer first sent each task of the round among the round's sends (1 = first): the part of
    its lag that fairness decides, apart from how fast the stack then runs it."""
    sends = [r["task"] for r in load_records(stack.history_dir, "wire-*.jsonl") if r.get("kind") == "sent"]
    order = dict.fromkeys(t for t in sends if t in round_ids)
    return {task: rank for rank, task in enumerate(order, start=1)}


def _by_key(keyed: list[tuple[str, str]], rank: dict[str, int], lag_ms: dict[str, float]) -> dict[str, Any]:
    """Each of B..K's last send (rank) and last start (ms after the resume)."""
    tasks: dict[str, list[str]] = {}
    for key, task in keyed:
        tasks.setdefault(key, []).append(task)
    return {
        key: {"last_rank": _last_rank(rank, ids), "last_start_ms": _finite(lag_ms, ids)} for key, ids in tasks.items()
    }


def _last_rank(rank: dict[str, int], ids: list[str]) -> int | None:
    """The last send of these tasks; None if one was never sent."""
    return max(rank[t] for t in ids) if all(t in rank for t in ids) else None


def _finite(lag_ms: dict[str, float], ids: list[str]) -> float | None:
    """The latest start of these tasks; None if one never started."""
    last = max(lag_ms[t] for t in ids)
    return last if math.isfinite(last) else None


def _schedule(client: AtfClient, keys: list[str]) -> list[tuple[str, str]]:
    """(flow key, task id) of each task the API took."""
    requests = [{"lambda": LAMBDA, "payload": {}, "flow_key": k} for k in keys]
    return [(k, r.task.id) for k, r in zip(keys, client.schedule_many(requests), strict=True) if r.task is not None]
