"""What the console shows, read from the local stack's table.

The local table is small and on loopback, so the console scans it on every
page: every task in every state, finished ones too, which the deployed API's
index-only statistics cannot count. Gates and dead letters go through the
core's own modules, as the API's routes do.
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from atf_core.amend import Amendment
from atf_core.api import BulkReprioritiseRequest, BulkRescheduleRequest, TaskSelection
from atf_core.aws import AwsClients
from atf_core.bulk import WAITING, BulkChange, BulkChanges
from atf_core.chains import Chains
from atf_core.config import StackConfig
from atf_core.deadletters import MAX_SELECTION, BulkResult, DeadLetter, DeadLetterFilter, DeadLetters
from atf_core.gating import Gating
from atf_core.schema import Gate, GateAction, Task, TaskStatus, utcnow
from atf_core.stats import KEYS_SHOWN
from atf_core.store.items import ItemStore
from atf_core.store.positions import Position
from atf_core.store.scan import TaskScan
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling
from atf_core.telemetry import percentile
from atf_sdk.snapshot import QueueRow, Snapshot

THROUGHPUT_WINDOW = timedelta(minutes=1)
LAG_WINDOW = timedelta(minutes=5)
MAX_TASKS = 50_000  # a scan this size is still quick on loopback; past it the console shows a sample
# States that get a column even when no task is in them (others appear when one is).
RUNNING = frozenset({TaskStatus.CLAIMED, TaskStatus.PROCESSING})
ALWAYS_SHOWN = ("new", "enqueued", "claimed", "processing", "retriable_failure", "success", "dead_letter")
# Upper bounds (ms) of the start-lag histogram's buckets; the last one is open.
LAG_BUCKETS_MS = (50, 100, 250, 500, 1_000, 2_000, 5_000, 10_000, 30_000, 60_000)


@dataclass(frozen=True)
class KeyRow:
    """One flow-control key of a lambda: its tasks waiting, running, and finished in the last minute."""

    lambda_name: str
    flow_key: str
    waiting: int
    running: int
    finished_per_min: int


@dataclass(frozen=True)
class Bucket:
    label: str
    count: int


def histogram(lags: list[float]) -> list[Bucket]:
    labels = [f"< {_ms(LAG_BUCKETS_MS[0])}"]
    labels += [f"{_ms(low)} - {_ms(high)}" for low, high in itertools.pairwise(LAG_BUCKETS_MS)]
    labels.append(f"{_ms(LAG_BUCKETS_MS[-1])} +")
    counts = Counter(bisect.bisect_right(LAG_BUCKETS_MS, lag) for lag in lags)
    return [Bucket(label, counts[i]) for i, label in enumerate(labels)]


def p95(values: list[float]) -> float | None:
    return percentile(values, 0.95) if values else None


def _ms(value: int) -> str:
    return f"{value // 1000} s" if value >= 1000 else f"{value} ms"


class ConsoleData:
    def __init__(self, clients: AwsClients, config: StackConfig) -> None:
        self.config = config
        self._scan = TaskScan(clients.dynamodb, config.table_name)
        self.store = DynamoTaskStore(clients.dynamodb, config)
        self._gating = Gating(self.store, config)
        chains = Chains(self.store, ItemStore(clients.dynamodb, config.table_name), config)
        self._dead_letters = DeadLetters(self.store, config, rejoin_chain=chains.rejoin)
        self._bulk = BulkChanges(self.store, config)
        self._scheduling = Scheduling(self.store, config)

    # -- tasks ---------------------------------------------------------------
    def tasks(self) -> list[Task]:
        return [scanned.task for scanned in self._scan.tasks(limit=MAX_TASKS)]

    def task(self, task_id: str) -> Task | None:
        return self.store.get(task_id)

    def snapshot(self, tasks: list[Task] | None = None, now: datetime | None = None) -> Snapshot:
        tasks = self.tasks() if tasks is None else tasks
        now = now or utcnow()
        rows = {
            (name, p): QueueRow(lambda_=name, priority=p, counts=dict.fromkeys(ALWAYS_SHOWN, 0))
            for name, spec in self.config.lambdas.items()
            for p in spec.priorities
        }
        finished: Counter[tuple[str, str]] = Counter()
        lags: dict[tuple[str, str], list[float]] = {key: [] for key in rows}
        for task in tasks:
            key = (task.lambda_, task.priority)
            if key not in rows:
                continue
            rows[key].counts[task.status.value] = rows[key].counts.get(task.status.value, 0) + 1
            if task.finished_at is not None and now - task.finished_at <= THROUGHPUT_WINDOW:
                finished[key] += 1
            lag, started = task.start_lag_ms, task.first_claimed_at
            if lag is not None and started is not None and now - started <= LAG_WINDOW:
                lags[key].append(lag)
        for key, row in rows.items():
            row.finished_per_min = float(finished[key])
            row.lag_p95_ms = p95(lags[key])
        dead = Counter(t.lambda_ for t in tasks if t.status is TaskStatus.DEAD_LETTER)
        return Snapshot(
            source="local console", as_of=now, rows=list(rows.values()), gates=self.gates(),
            dead_letters={name: dead[name] for name in self.config.lambdas},
            notes=["finished/min: the last minute; lag p95: tasks first started in the last 5 minutes"],
        )  # fmt: skip

    @staticmethod
    def key_rows(tasks: list[Task], now: datetime | None = None) -> list[KeyRow]:
        """The busiest flow keys (most waiting and running), up to KEYS_SHOWN; keyless tasks are not counted."""
        now = now or utcnow()
        counts: dict[tuple[str, str], Counter[str]] = {}
        for task in tasks:
            if task.flow_key is None:
                continue
            tally = counts.setdefault((task.lambda_, task.flow_key), Counter())
            if task.status in WAITING:
                tally["waiting"] += 1
            elif task.status in RUNNING:
                tally["running"] += 1
            elif task.finished_at is not None and now - task.finished_at <= THROUGHPUT_WINDOW:
                tally["finished"] += 1
        # A key whose tasks all ended over a minute ago (say, cancelled) has nothing to show: no row of 0/0/0.
        rows = [KeyRow(name, key, c["waiting"], c["running"], c["finished"]) for (name, key), c in counts.items() if c]
        rows.sort(key=lambda r: (-(r.waiting + r.running), r.lambda_name, r.flow_key))
        return rows[:KEYS_SHOWN]

    def lag_histograms(self, tasks: list[Task]) -> dict[str, tuple[list[Bucket], float | None, int]]:
        """Per lambda: the buckets, p95 and count of the start lag of every task in the table that has started."""
        found: dict[str, list[float]] = {name: [] for name in self.config.lambdas}
        for task in tasks:
            lag = task.start_lag_ms
            if lag is not None and task.lambda_ in found:
                found[task.lambda_].append(lag)
        return {name: (histogram(lags), p95(lags), len(lags)) for name, lags in found.items()}

    # -- gates ---------------------------------------------------------------
    def gates(self) -> list[Gate]:
        # The gates in force, as the API lists them: one past its `until` is still stored until the next set
        return sorted(self._gating.view().gates, key=lambda g: (g.lambda_, g.collection or ""))

    def set_gate(self, lambda_name: str, collection: str | None, action: GateAction, reason: str) -> Gate:
        return self._gating.set(lambda_name, collection, action, None, reason)

    def lift_gate(self, lambda_name: str, collection: str | None) -> None:
        self._gating.lift(lambda_name, collection)

    # -- dead letters --------------------------------------------------------
    def dead_letters(self, selection: DeadLetterFilter, after: Position | None = None) -> list[DeadLetter]:
        return self._dead_letters.page(selection, after).letters

    def dead_letters_in(self, selection: DeadLetterFilter) -> tuple[int, bool]:
        """How many dead letters the whole selection holds, past any limit, up to the core's largest page (and
        whether more follow): a local table is read whole anyway."""
        page = self._dead_letters.page(replace(selection, limit=MAX_SELECTION))
        return len(page.letters), page.more

    def redrive(
        self, selection: DeadLetterFilter, dry_run: bool, per_second: float | None, after: Position | None = None
    ) -> BulkResult:
        return self._dead_letters.redrive(selection, dry_run=dry_run, per_second=per_second, after=after)

    # -- waiting tasks -------------------------------------------------------
    def waiting(self, selection: TaskSelection) -> BulkChange:
        """The waiting tasks a selection holds (a bulk action's dry run lists them)."""
        return self._bulk.cancel(selection.filter(), dry_run=True)

    def bulk(self, request: TaskSelection, now: datetime) -> BulkChange:
        """The action the request's model names, as POST /v1/tasks/bulk/... runs it."""
        selection, dry_run, rate, cursor = request.filter(), request.dry_run, request.per_second, request.cursor
        if isinstance(request, BulkRescheduleRequest):
            return self._bulk.reschedule(selection, request.when(now), dry_run, rate, cursor)
        if isinstance(request, BulkReprioritiseRequest):
            return self._bulk.reprioritise(selection, request.priority, dry_run, rate, cursor)
        return self._bulk.cancel(selection, dry_run, rate, cursor)

    def change(self, task_id: str, amendment: Amendment) -> Task:
        return self._scheduling.amend(task_id, amendment)
