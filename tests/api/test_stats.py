"""GET /v1/lambdas/{lambda}/stats on a lambda only this module schedules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from atf_core import lifecycle
from atf_core.aws import make_clients
from atf_core.schema import TaskError, TaskStatus
from atf_core.stats import Stats
from atf_core.store.base import Change, TaskRef
from atf_core.store.index import IndexStore
from atf_core.store.items import ItemStore
from atf_local.stack import LocalStack
from atf_sdk.client import AtfClient
from tests.api.states import advance


@pytest.fixture(scope="module")
def report(client: AtfClient, store: Any) -> dict[str, str]:
    """3 high tasks in an hour, 2 low ones due now, 1 low one a minute overdue, 1 processing, 1 done."""
    ids: dict[str, str] = {}
    for i in range(3):
        client.schedule("report", {"i": i}, priority="high", delay_seconds=3600)
    for i in range(2):
        client.schedule("report", {"due": i}, priority="low")
    ids["overdue"] = client.schedule("report", priority="low", run_at=datetime.now(UTC) - timedelta(minutes=1)).id
    ids["running"] = client.schedule("report", {"run": 1}, priority="low").id
    advance(store, ids["running"], TaskStatus.PROCESSING)
    advance(store, client.schedule("report", {"done": 1}, priority="low").id, TaskStatus.SUCCESS)
    return ids


def test_counts_by_priority_and_state(client: AtfClient, report: dict[str, str]) -> None:
    stats = client.stats("report")
    counts = {p: (c.scheduled, c.due, c.started) for p, c in stats.priorities.items()}
    assert counts == {"high": (3, 0, 0), "low": (0, 3, 1)}
    assert stats.states == {TaskStatus.NEW: 6, TaskStatus.PROCESSING: 1}, "finished tasks are not counted"
    assert stats.complete and stats.sampled == 4


def test_oldest_due_and_start_lag(client: AtfClient, report: dict[str, str]) -> None:
    stats = client.stats("report")
    assert stats.oldest_due is not None
    assert (stats.oldest_due.id, stats.oldest_due.status) == (report["overdue"], TaskStatus.NEW)
    assert stats.oldest_due.waiting_s >= 60
    lag = stats.start_lag
    assert lag.samples == 1 and lag.p50_ms is not None and 0 <= lag.p50_ms == lag.max_ms < 30_000


def test_a_small_sample_says_it_is_partial(stack: LocalStack, report: dict[str, str]) -> None:
    db, table = make_clients(stack.endpoint).dynamodb, stack.config.table_name
    stats = Stats(IndexStore(db, table), ItemStore(db, table), stack.config, sample=2).of("report")
    assert not stats.complete and stats.sampled == 2
    assert stats.priorities["low"].due == 3, "counts stay exact when only the sample is cut"


def test_the_configured_limits_are_shown(client: AtfClient) -> None:
    stats = client.stats("chore")
    assert (stats.limits.max_starts_per_second, stats.limits.max_running) == (50, 8)
    assert {c: (lim.max_starts_per_second, lim.max_running) for c, lim in stats.collection_limits.items()} == {
        "bulk": (None, 2)
    }
    unlimited = client.stats("mail")
    assert (unlimited.limits.max_running, unlimited.collection_limits, unlimited.dead_letters) == (None, {}, 0)


def test_the_busiest_flow_keys_are_counted_from_the_live_tasks(client: AtfClient, store: Any) -> None:
    # Given on `mail`: a key with three due tasks and one running, another with one due, a keyless due task
    # (half an hour overdue: the oldest entries, so within the sample whatever else this package left due)
    busy, quiet = f"busy-{datetime.now(UTC):%H%M%S%f}", f"quiet-{datetime.now(UTC):%H%M%S%f}"
    overdue = datetime.now(UTC) - timedelta(minutes=30)
    for _ in range(3):
        client.schedule("mail", flow_key=busy, run_at=overdue)
    advance(store, client.schedule("mail", flow_key=busy, run_at=overdue).id, TaskStatus.PROCESSING)
    client.schedule("mail", flow_key=quiet, run_at=overdue)
    client.schedule("mail", run_at=overdue)
    # When the stats are read, then each key shows its backlog and its started tasks, the busier first
    keys = [(k.flow_key, k.due, k.started) for k in client.stats("mail").keys]
    assert (busy, 3, 1) in keys and (quiet, 1, 0) in keys
    assert keys.index((busy, 3, 1)) < keys.index((quiet, 1, 0))
    assert all(k is not None for k, _, _ in keys)


def test_a_retried_task_counts_with_its_first_start(client: AtfClient, store: Any, report: dict[str, str]) -> None:
    # Given the module's running task, and a task due ten minutes ago, claimed now, failed, and claimed again
    task = advance(
        store, client.schedule("report", run_at=datetime.now(UTC) - timedelta(minutes=10)).id, TaskStatus.CLAIMED
    )
    now = datetime.now(UTC)
    error = TaskError(type="E", message="once", attempt=1, at=now)
    failed = Change(now=now, attempt=1, next_at=now, error=error)
    assert store.transition(TaskRef.of(task), lifecycle.FAIL_RETRIABLE, failed).applied
    assert store.transition(TaskRef.of(task), lifecycle.CLAIM, Change(now=datetime.now(UTC), attempt=1)).applied
    # When the stats are read, then its lag is in them, the first claim's (ten minutes), beside the running task's
    lag = client.stats("report").start_lag
    assert lag.samples == 2 and lag.max_ms is not None and 600_000 <= lag.max_ms < 630_000
