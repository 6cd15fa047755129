"""What `atf top` shows, and where it comes from.

A Snapshot is one frame: per (lambda, priority) the tasks by state, the
finished-per-minute rate and the start-lag p95, plus the gates and the dead
letters. Three sources fill it:

- ApiSource: the frontend API of any stack, through the SDK client. The
  stats route counts only live tasks (scheduled, due, started) and samples
  start lag over them; finished tasks have left the index it reads. So rates
  and the p95 come from CloudWatch when a CloudWatchRates is given (the
  metrics of atf_core.telemetry), and are left blank otherwise.
- The local console's /api/snapshot (ConsoleSource): the local stack reads
  its whole table, so every state, rate and percentile is exact.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from atf_core.schema import Gate, utcnow
from atf_core.telemetry import WORKER_SERVICE, Dimension, Metric

if TYPE_CHECKING:
    from atf_sdk.client import AtfClient

# Column order of the counts: the stats API's buckets, then the task states in lifecycle order.
COUNT_ORDER = (
    "scheduled", "due", "started",
    "new", "waiting", "enqueued", "claimed", "processing", "retriable_failure",
    "success", "fatal_failure", "dead_letter", "cancelled", "dropped", "expired",
)  # fmt: skip


class QueueRow(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    lambda_: str = Field(alias="lambda")
    priority: str
    counts: dict[str, int] = Field(default_factory=dict)
    finished_per_min: float | None = None
    lag_p95_ms: float | None = None


class Snapshot(BaseModel):
    source: str
    as_of: datetime
    rows: list[QueueRow]
    gates: list[Gate] = Field(default_factory=list)
    dead_letters: dict[str, int] | None = Field(default=None, description="Per lambda; None when unknown.")
    notes: list[str] = Field(default_factory=list)

    def columns(self) -> list[str]:
        present = {key for row in self.rows for key in row.counts}
        return [c for c in COUNT_ORDER if c in present] + sorted(present - set(COUNT_ORDER))


class Source(Protocol):
    def snapshot(self) -> Snapshot: ...


@dataclass(frozen=True)
class Rates:
    finished_per_min: dict[tuple[str, str], float]
    lag_p95_ms: dict[tuple[str, str], float]


class CloudWatchRates:
    """Finished per minute and start-lag p95 per (lambda, priority) over the last few minutes,
    from the worker hosts' metrics (their exact series: service = the workers' service name)."""

    FINISHED = (Metric.SUCCEEDED, Metric.RETRIABLE_FAILURES, Metric.FATAL_FAILURES)

    def __init__(self, cloudwatch: Any, namespace: str, window_min: int = 5, service: str = WORKER_SERVICE) -> None:
        self._cw = cloudwatch
        # Required: each deployed environment emits into its own (StackConfig.metrics_namespace), and a
        # default would read another environment's series, or nothing, without a word.
        self._namespace = namespace
        self._window = window_min
        self._service = service

    def rates(self, queues: Sequence[tuple[str, str]], now: datetime | None = None) -> Rates:
        now = now or utcnow()
        queries, keys = [], {}
        for n, (lambda_name, priority) in enumerate(queues):
            for m, metric in enumerate(self.FINISHED):
                keys[f"f{n}x{m}"] = ("finished", n)
                queries.append(self._query(f"f{n}x{m}", metric, "Sum", lambda_name, priority))
            keys[f"lag{n}"] = ("lag", n)
            queries.append(self._query(f"lag{n}", Metric.START_LAG_MS, "p95", lambda_name, priority))
        found: dict[str, list[float]] = {}
        for start in range(0, len(queries), 500):
            reply = self._cw.get_metric_data(
                MetricDataQueries=queries[start : start + 500],
                StartTime=now - timedelta(minutes=self._window),
                EndTime=now,
            )
            found.update({r["Id"]: list(r.get("Values", [])) for r in reply["MetricDataResults"]})
        return self._assemble(queues, keys, found)

    def _query(self, query_id: str, metric: str, stat: str, lambda_name: str, priority: str) -> dict[str, Any]:
        dimensions = {Dimension.LAMBDA: lambda_name, Dimension.PRIORITY: priority, "service": self._service}
        return {
            "Id": query_id,
            "MetricStat": {
                "Metric": {
                    "Namespace": self._namespace,
                    "MetricName": metric,
                    "Dimensions": [{"Name": k, "Value": v} for k, v in dimensions.items()],
                },
                "Period": self._window * 60,
                "Stat": stat,
            },
        }

    def _assemble(
        self, queues: Sequence[tuple[str, str]], keys: dict[str, tuple[str, int]], found: dict[str, list[float]]
    ) -> Rates:
        finished: dict[tuple[str, str], float] = {}
        lags: dict[tuple[str, str], float] = {}
        for query_id, (kind, n) in keys.items():
            values = found.get(query_id) or []
            if kind == "finished":
                finished[queues[n]] = finished.get(queues[n], 0.0) + sum(values) / self._window
            elif values:
                lags[queues[n]] = max(values)
        return Rates(finished, lags)


class ApiSource:
    """Any stack, through its frontend API (and CloudWatch for rates, when given)."""

    def __init__(self, client: AtfClient, lambdas: Sequence[str], rates: CloudWatchRates | None = None) -> None:
        self._client = client
        self._lambdas = list(lambdas)
        self._rates = rates

    def snapshot(self) -> Snapshot:
        rows: list[QueueRow] = []
        dead: dict[str, int] = {}
        for name in self._lambdas:
            stats = self._client.stats(name)
            for priority, counts in stats.priorities.items():
                rows.append(QueueRow(lambda_=name, priority=priority, counts=counts.model_dump()))
            dead[name] = stats.dead_letters
        notes = []
        if self._rates is not None:
            rates = self._rates.rates([(r.lambda_, r.priority) for r in rows])
            for row in rows:
                row.finished_per_min = rates.finished_per_min.get((row.lambda_, row.priority))
                row.lag_p95_ms = rates.lag_p95_ms.get((row.lambda_, row.priority))
        else:
            notes.append("live tasks only; finished/min and lag p95 need --cloudwatch (or the local console)")
        return Snapshot(
            source=self._client.endpoint, as_of=utcnow(), rows=rows, gates=self._client.gates(),
            dead_letters=dead, notes=notes,
        )  # fmt: skip


class ConsoleSource:
    """The local stack's console, which reads the whole table (GET /api/snapshot)."""

    def __init__(self, url: str, timeout_s: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self._timeout = timeout_s

    def snapshot(self) -> Snapshot:
        """The console's snapshot; Unavailable where it does not answer, Internal where its answer does not read
        as this version's snapshot (a console of another version): neither is a mistake in the command."""
        from atf_core.errors import Internal, Unavailable

        url = f"{self.url}/api/snapshot"
        where = f"GET {url}"
        try:
            with urllib.request.urlopen(url, timeout=self._timeout) as reply:
                answer = reply.read()
        except OSError as error:  # urllib's URLError and HTTPError among them
            raise Unavailable(f"{where}: {error}") from error
        try:
            return Snapshot.model_validate(json.loads(answer))
        except ValueError as error:  # not JSON, or not a snapshot (pydantic's ValidationError)
            raise Internal(f"{where}: the console's answer is not a snapshot this atf reads: {error}") from error
