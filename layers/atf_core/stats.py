"""Per-lambda statistics for GET /v1/lambdas/{lambda}/stats, read from the scheduling index.

Only live tasks are in the sparse `due` index, partitioned by association
("n" not started, "s" started), lambda, priority and shard. For each
(priority, shard) this module reads:

- `scheduled`: a COUNT query over the "n" partition beyond the consumer's
  horizon (now + lookahead). Those entries are all still `new`.
- `due` and `started`: the oldest `sample` entries of the "n" partition up to
  the horizon and of the "s" partition; only when a partition holds more does
  a COUNT query follow. In a healthy stack both are small: they are the
  backlog and the tasks in flight.

The oldest `sample` entries of the lambda are then resolved in one or a few
BatchGetItem calls that project only status and times, which gives the
counts by state, the oldest due task and the start-lag (claim time minus
scheduled time, on first attempts) of the tasks that have started and are
still live. Finished tasks have left the index and are not counted: their
rates and their full start-lag distribution are the CloudWatch metrics in
atf_core.telemetry. Counting them here would need a table scan.

Beside the live tasks: `dead_letters`, a COUNT query over each (priority,
shard) of the lambda's dead-letter partitions; `schedules`, the stack's
schedules that create this lambda's tasks, read from the schedules' own index
partition (one query, and one BatchGetItem per 100 schedules, up to `sample`
schedules); and `limits` and `collection_limits`, straight from the
configuration (the worker controllers enforce them at claim).

Cost: about four small queries per (priority, shard) plus one BatchGetItem
per 100 sampled tasks or schedules; COUNT queries page through at most
`max_pages` pages (1 MB each), past which the counts are lower bounds and
`complete` is false.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import islice
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from atf_core.config import KeyLimits, Limits, StackConfig
from atf_core.definitions import Attr
from atf_core.lifecycle import Assoc
from atf_core.recurrence import Schedule
from atf_core.schema import TaskStatus, from_ms, start_lag_ms, to_ms, utcnow
from atf_core.store import codec
from atf_core.store.base import DueEntry
from atf_core.store.index import IndexStore
from atf_core.store.items import PARKED_MS, SCHEDULES_PARTITION, ItemStore, schedule_from
from atf_core.telemetry import percentile

KEYS_SHOWN = 20  # the busiest flow keys a lambda's stats list (a key per customer may mean millions)


class PriorityCounts(BaseModel):
    scheduled: int = Field(description="New tasks whose time has not come yet.")
    due: int = Field(description="Tasks whose time has come that have not yet reported progress on a first attempt.")
    started: int = Field(description="Tasks that have started: running, or waiting to retry.")


class OldestDue(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    id: str
    priority: str
    collection: str
    status: TaskStatus
    due_at: datetime
    waiting_s: float = Field(description="How long its time has passed.")


class StartLag(BaseModel):
    samples: int = Field(description="Live tasks in the sample that have started (retried ones included).")
    p50_ms: int | None = None
    p90_ms: int | None = None
    max_ms: int | None = None


class KeyActivity(BaseModel):
    """One flow-control key's share of the lambda's live tasks, as the read entries show it."""

    flow_key: str
    due: int = Field(description="Its tasks whose time has come, not yet started: its backlog.")
    started: int = Field(description="Its tasks that have started: running, or waiting to retry.")


class ScheduleSummary(BaseModel):
    """A schedule that creates this lambda's tasks, in brief (GET /v1/schedules/{name} has the rest)."""

    name: str
    cron: str | None
    every_seconds: float | None
    timezone: str
    collection: str
    paused: bool
    next_occurrence: datetime | None
    fired: int
    skipped: int

    @classmethod
    def of(cls, schedule: Schedule) -> ScheduleSummary:
        spec = schedule.spec
        return cls(
            name=schedule.name,
            cron=spec.cron,
            every_seconds=spec.every_seconds,
            timezone=spec.timezone,
            collection=spec.collection,
            paused=schedule.paused,
            next_occurrence=schedule.next_occurrence,
            fired=schedule.fired,
            skipped=schedule.skipped,
        )


class LambdaStats(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    lambda_: str = Field(alias="lambda")
    as_of: datetime
    priorities: dict[str, PriorityCounts]
    states: dict[TaskStatus, int] = Field(description="Live tasks by state: the scheduled ones and the sample.")
    sampled: int = Field(description="How many due or started tasks were read to count states.")
    oldest_due: OldestDue | None
    start_lag: StartLag
    dead_letters: int = Field(default=0, description="Tasks that failed for good and wait to be redriven or discarded.")
    schedules: list[ScheduleSummary] = Field(default_factory=list, description="Schedules creating its tasks.")
    limits: Limits = Field(default_factory=Limits, description="Configured for the whole lambda.")
    collection_limits: dict[str, Limits] = Field(default_factory=dict, description="Configured per collection.")
    key_limits: KeyLimits | None = Field(default=None, description="Configured per flow-control key.")
    keys: list[KeyActivity] = Field(
        default_factory=list,
        description=f"The busiest flow keys (up to {KEYS_SHOWN}) among the due and started tasks read; "
        "complete when `complete` is.",
    )
    complete: bool = Field(description="False when a cap was hit: counts are lower bounds, states a sample.")


@dataclass(frozen=True)
class _Partition:
    """What one (priority, shard) contributes."""

    priority: str
    scheduled: int
    due: int
    started: int
    dead: int
    entries: list[DueEntry]
    capped: bool
    due_keys: Counter[str]  # flow keys of the due entries read
    started_keys: Counter[str]  # and of the started ones


class Stats:
    def __init__(
        self,
        index: IndexStore,
        items: ItemStore,
        config: StackConfig,
        sample: int = 200,
        max_pages: int = 20,
        workers: int = 8,
    ) -> None:
        self._index = index
        self._items = items
        self._config = config
        self._sample = sample
        self._max_pages = max_pages
        self._workers = workers

    def of(self, lambda_name: str, now: datetime | None = None) -> LambdaStats:
        spec = self._config.lambda_named(lambda_name)
        now = now or utcnow()
        horizon = to_ms(now + timedelta(seconds=self._config.lookahead))
        jobs = [(p, s) for p in spec.priorities for s in range(self._config.shards_of(lambda_name))]
        with ThreadPoolExecutor(max_workers=min(self._workers, len(jobs))) as pool:
            schedules = pool.submit(self._schedules, lambda_name)
            parts = list(pool.map(lambda job: self._partition(lambda_name, job[0], job[1], horizon), jobs))
        sample = sorted((e for part in parts for e in part.entries), key=lambda e: e.next_ms)[: self._sample]
        items = self._resolve(sample)
        stats = _assemble(lambda_name, now, spec.priorities, parts, sample, items)
        found, all_read = schedules.result()
        return stats.model_copy(
            update={
                "schedules": found,
                "limits": spec.limits,
                "collection_limits": spec.collection_limits,
                "key_limits": spec.key_limits,
                "complete": stats.complete and all_read,
            }
        )

    def _partition(self, lambda_name: str, priority: str, shard: int, horizon: int) -> _Partition:
        new_pk = codec.index_partition(Assoc.NEW, lambda_name, priority, shard)
        started_pk = codec.index_partition(Assoc.STARTED, lambda_name, priority, shard)
        scheduled, capped = self._index.count(new_pk, horizon + 1, None, self._max_pages)  # beyond the horizon
        due_entries, more_due = self._index.oldest(new_pk, horizon, self._sample)
        started_entries, more_started = self._index.oldest(started_pk, None, self._sample)
        due, started = len(due_entries), len(started_entries)
        if more_due:
            due, capped_due = self._index.count(new_pk, None, horizon, self._max_pages)
            capped = capped or capped_due
        if more_started:
            started, capped_started = self._index.count(started_pk, None, None, self._max_pages)
            capped = capped or capped_started
        dead_pk = codec.index_partition(Assoc.DEAD_LETTER, lambda_name, priority, shard)
        dead, capped_dead = self._index.count(dead_pk, None, None, self._max_pages)
        entries, capped = due_entries + started_entries, capped or capped_dead
        return _Partition(
            priority, scheduled, due, started, dead, entries, capped, _keys(due_entries), _keys(started_entries)
        )

    def _resolve(self, entries: list[DueEntry]) -> dict[str, dict[str, Any]]:
        """Status and times of the sampled tasks, projected so a large payload costs nothing."""
        fields = (Attr.STATUS, Attr.SCHEDULED, Attr.FIRST_CLAIMED)
        return self._items.get_many([e.id for e in entries], fields)

    def _schedules(self, lambda_name: str) -> tuple[list[ScheduleSummary], bool]:
        """The lambda's schedules (of the first `sample` of the stack), and whether every one was read."""
        ids = list(islice(self._items.partition(SCHEDULES_PARTITION, PARKED_MS), self._sample + 1))
        raws = self._items.get_many(ids[: self._sample])  # a schedule's spec holds its payload: read it whole
        schedules = sorted((schedule_from(raw) for raw in raws.values()), key=lambda s: s.name)
        return [ScheduleSummary.of(s) for s in schedules if s.spec.lambda_ == lambda_name], len(ids) <= self._sample


def _assemble(
    lambda_name: str,
    now: datetime,
    priorities: list[str],
    parts: list[_Partition],
    sample: list[DueEntry],
    items: dict[str, dict[str, Any]],
) -> LambdaStats:
    counts = {p: PriorityCounts(scheduled=0, due=0, started=0) for p in priorities}
    for part in parts:
        c = counts[part.priority]
        counts[part.priority] = PriorityCounts(
            scheduled=c.scheduled + part.scheduled, due=c.due + part.due, started=c.started + part.started
        )
    states: Counter[TaskStatus] = Counter(TaskStatus(raw[Attr.STATUS]) for raw in items.values())
    states[TaskStatus.NEW] += sum(c.scheduled for c in counts.values())
    backlog = sum(c.due + c.started for c in counts.values())
    fields: dict[str, Any] = {
        "lambda": lambda_name,
        "as_of": now,
        "priorities": counts,
        "states": {s: states[s] for s in TaskStatus if states[s]},
        "sampled": len(sample),
        "oldest_due": _oldest_due(now, sample, items),
        "start_lag": _start_lag(items.values()),
        "dead_letters": sum(p.dead for p in parts),
        "keys": _busiest_keys(parts),
        "complete": not any(p.capped for p in parts) and len(sample) >= backlog,
    }
    return LambdaStats.model_validate(fields)


def _keys(entries: list[DueEntry]) -> Counter[str]:
    return Counter(e.flow_key for e in entries if e.flow_key is not None)


def _busiest_keys(parts: list[_Partition]) -> list[KeyActivity]:
    due: Counter[str] = sum((p.due_keys for p in parts), Counter())
    started: Counter[str] = sum((p.started_keys for p in parts), Counter())
    busiest = sorted(set(due) | set(started), key=lambda k: (-(due[k] + started[k]), k))[:KEYS_SHOWN]
    return [KeyActivity(flow_key=k, due=due[k], started=started[k]) for k in busiest]


def _oldest_due(now: datetime, sample: list[DueEntry], items: dict[str, dict[str, Any]]) -> OldestDue | None:
    now_ms = to_ms(now)
    for entry in sample:  # oldest first
        raw = items.get(entry.id)
        if entry.next_ms > now_ms or raw is None:
            continue
        return OldestDue(
            id=entry.id,
            priority=entry.priority,
            collection=entry.collection,
            status=TaskStatus(raw[Attr.STATUS]),
            due_at=from_ms(entry.next_ms),
            waiting_s=(now_ms - entry.next_ms) / 1000,
        )
    return None


def _start_lag(items: Iterable[dict[str, Any]]) -> StartLag:
    lags = sorted(
        start_lag_ms(int(raw[Attr.SCHEDULED]), int(raw[Attr.FIRST_CLAIMED]))
        for raw in items
        if Attr.FIRST_CLAIMED in raw
    )
    if not lags:
        return StartLag(samples=0)
    return StartLag(samples=len(lags), p50_ms=percentile(lags, 0.5), p90_ms=percentile(lags, 0.9), max_ms=lags[-1])
