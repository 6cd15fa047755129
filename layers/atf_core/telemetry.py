"""Metric names, shared by the components that emit them and the dashboard that shows them,
and the buffer every long-lived component emits them through.

Every component emits CloudWatch EMF through Powertools Metrics under one
namespace, with the lambda and priority as dimensions where they apply.
Powertools puts one dimension set on a whole EMF document, while a consumer
poll or a worker host sees many (lambda, priority) pairs at once: so values
are gathered here per dimension set and each set is flushed as its own
document, counts summed, timings kept value by value (CloudWatch computes
percentiles from them).
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from atf_core.aws import THROTTLING_CODES

# The metric namespace outside a deployment (the local stack, tests); a deployed environment's is
# namespace_of(its name), so two environments in one account keep their metrics and dashboards apart.
NAMESPACE = "ATF"
# The worker hosts' `service` dimension when POWERTOOLS_SERVICE_NAME is unset; the CDK app sets the same
# value (atf_infra.constructs.workers), and its start-lag alarms name it.
WORKER_SERVICE = "worker"
CONSUMER_SERVICE = "consumer"
# Where Powertools reads a process's service name and metric namespace; the CDK app sets both.
SERVICE_NAME_ENV = "POWERTOOLS_SERVICE_NAME"
METRICS_NAMESPACE_ENV = "POWERTOOLS_METRICS_NAMESPACE"
FLUSH_EVERY_S = 10.0
# EMF takes up to 100 values of one metric per document, and Powertools prints
# on its own (even when metrics are disabled) once a metric reaches 100.
_VALUES_PER_DOCUMENT = 99


class Metric:
    SCHEDULED = "Scheduled"  # frontend: a task was created
    ENQUEUED = "Enqueued"  # consumer: messages sent, re-enqueued tasks included
    REQUEUED = "Requeued"  # consumer: a stuck task sent again
    CLAIMED = "Claimed"  # controller: a claim applied
    STARTED = "Started"  # executor: a callback began
    SUCCEEDED = "Succeeded"
    RETRIABLE_FAILURES = "RetriableFailures"
    FATAL_FAILURES = "FatalFailures"  # failed for good, dead-lettered or not
    DEAD_LETTERED = "DeadLettered"  # of those, the ones kept as dead letters
    DROPPED = "Dropped"  # by a drop gate, in the consumer or the controller
    EXHAUSTED = "Exhausted"  # consumer: the last attempt was lost, found through its lease or claim timeout
    EXPIRED = "Expired"  # consumer: expire_at passed before the task started
    LIMITED = "Limited"  # controller: a rate or concurrency limit held a task back
    # controller, per lambda (never per key: a dimension per flow key would be a metric per customer id):
    KEY_WAITED = "KeyWaited"  # a task waited for a running slot of its flow key (max_running)
    KEY_THROTTLED = "KeyThrottled"  # a task waited over its flow key's max_starts_per_second (throttle)
    KEY_RATE_LIMITED = "KeyRateLimited"  # of the drops, tasks over their flow key's rate (rate_limit)
    START_LAG_MS = "StartLagMs"  # claim time minus scheduled time, first attempts
    EXECUTION_MS = "ExecutionMs"  # the callback's run time
    CONSUMER_LOOP_SECONDS = "ConsumerLoopSeconds"
    TASKS_PER_LOOP = "TasksPerLoop"
    THROTTLES = "Throttles"  # AWS calls answered with a throttling error (before botocore's retry)
    CONSUMER_ERRORS = "ConsumerErrors"
    HOUSEKEEPING_FAILURES = "HousekeepingFailures"  # consumer: firing periodic schedules or sweeping chains raised
    TASKS_DUE_SOON = "TasksDueSoon"  # consumer, per lambda: tasks due within the look-ahead, each group its shards


Number = TypeVar("Number", int, float)


def percentile(values: Iterable[Number], fraction: float) -> Number:
    """The nearest-rank percentile: the smallest value with at least `fraction` (0 < fraction <= 1) of the
    values at or below it, so always one that was observed; p50 is the lower median. The one definition
    behind every pNN the API, the console, the fault checker and the benchmarks report, and how CloudWatch's
    pNN reads for small samples."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values to take a percentile of")
    rank = math.ceil(round(fraction * len(ordered), 9))  # rounded first: 0.07 * 100 is 7.000000000000001
    return ordered[max(1, rank) - 1]


class LogLine:
    """Messages of the worker hosts' log lines that the dashboard's Logs Insights queries look for."""

    TASK_STARTED = "task started"  # executor: an attempt's callback began (the task's keys on the line)
    HELD_BACK = "task held back by its flow key"  # controller: once a task and limit, with HELD_BY


class LogKey:
    """Keys of those lines (besides Powertools' own) the queries read."""

    FLOW_KEY = "flow_key"
    HELD_BY = "held_by"  # a limits.KeyHold value: max_running, throttle or rate_limit


class Dimension:
    LAMBDA = "lambda"
    PRIORITY = "priority"


Dimensions = tuple[tuple[str, str], ...]


def queue(lambda_name: str, priority: str) -> dict[str, str]:
    """The dimensions of a (lambda, priority) metric."""
    return {Dimension.LAMBDA: lambda_name, Dimension.PRIORITY: priority}


def namespace_of(environment: str) -> str:
    """A deployed environment's metric namespace (its StackConfig.name)."""
    return f"{NAMESPACE}/{environment}"


def metrics_namespace() -> str:
    """The namespace this process emits into: what its deployment set (METRICS_NAMESPACE_ENV), else NAMESPACE."""
    return os.environ.get(METRICS_NAMESPACE_ENV) or NAMESPACE


class MetricBuffer:
    """Thread-safe: count() and observe() from any thread, flush() from one."""

    def __init__(self, service: str, namespace: str | None = None, flush_every_s: float = FLUSH_EVERY_S) -> None:
        self.service = service
        self.namespace = namespace or metrics_namespace()
        self.flush_every_s = flush_every_s
        self._lock = threading.Lock()
        self._counts: dict[Dimensions, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self._values: dict[Dimensions, dict[tuple[str, str], list[float]]] = defaultdict(lambda: defaultdict(list))
        self._flushed = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def count(self, name: str, value: float = 1, dimensions: Mapping[str, str] | None = None) -> None:
        with self._lock:
            self._counts[_key(dimensions)][name] += value

    def observe(self, name: str, value: float, unit: str, dimensions: Mapping[str, str] | None = None) -> None:
        with self._lock:
            self._values[_key(dimensions)][(name, unit)].append(value)

    def flush_if_due(self) -> int:
        if time.monotonic() - self._flushed < self.flush_every_s:
            return 0
        return self.flush()

    def flush(self) -> int:
        """Emit what was gathered, one EMF document per dimension set (and per 99 values); returns how many."""
        with self._lock:
            counts, values = self._counts, self._values
            self._counts, self._values = defaultdict(lambda: defaultdict(float)), defaultdict(lambda: defaultdict(list))
            self._flushed = time.monotonic()
        documents = 0
        for dims in sorted(set(counts) | set(values)):
            for chunk in _documents(counts.get(dims, {}), values.get(dims, {})):
                self._emit(dims, chunk)
                documents += 1
        return documents

    def _emit(self, dims: Dimensions, metrics: list[tuple[str, str, float]]) -> None:
        from aws_lambda_powertools.metrics import EphemeralMetrics

        document = EphemeralMetrics(namespace=self.namespace, service=self.service)
        for dimension, label in dims:
            document.add_dimension(name=dimension, value=label)
        for name, unit, value in metrics:
            document.add_metric(name=name, unit=unit, value=value)
        document.flush_metrics()

    def start(self) -> MetricBuffer:
        """Flush every flush_every_s from a daemon thread, for a long-running process."""
        self._thread = threading.Thread(target=self._run, name="metrics-flush", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.flush_every_s):
            self.flush()

    def close(self) -> None:
        """Stop the flushing thread and flush what is left."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.flush()


def _key(dimensions: Mapping[str, str] | None) -> Dimensions:
    return tuple(sorted((dimensions or {}).items()))


def _documents(
    counts: Mapping[str, float], values: Mapping[tuple[str, str], list[float]]
) -> list[list[tuple[str, str, float]]]:
    """Split the metrics of one dimension set into documents EMF accepts."""
    first: list[tuple[str, str, float]] = [(name, "Count", total) for name, total in sorted(counts.items())]
    documents = [first]
    for (name, unit), observed in sorted(values.items()):
        for i in range(0, len(observed), _VALUES_PER_DOCUMENT):
            chunk = [(name, unit, v) for v in observed[i : i + _VALUES_PER_DOCUMENT]]
            target = documents[i // _VALUES_PER_DOCUMENT] if i // _VALUES_PER_DOCUMENT < len(documents) else None
            if target is None:
                documents.append(chunk)
            else:
                target.extend(chunk)
    return [d for d in documents if d]


def watch_throttles(client: Any, on_throttle: Callable[[str], None]) -> None:
    """Call on_throttle(service) for every attempt of a boto3 client's calls that AWS throttled.

    botocore retries throttling on its own, so the calls mostly succeed in the end:
    counting each throttled attempt shows the pressure before it turns into errors.
    """
    service = client.meta.service_model.service_id.hyphenize()

    def received(parsed_response: Mapping[str, Any] | None = None, **_: Any) -> None:
        code = ((parsed_response or {}).get("Error") or {}).get("Code")
        if code in THROTTLING_CODES:
            on_throttle(service)

    client.meta.events.register(f"response-received.{service}", received)
