"""Logs and metrics of a worker host's processes.

Logs: every line, the framework's and the callbacks' own (any stdlib logger),
is one JSON object in Powertools' format on stdout, and while a task runs the
thread running it adds the task's id, attempt, lambda, priority and
collection to each of its lines (Powertools' thread-local keys).

Metrics: CloudWatch EMF on stdout, through atf_core.telemetry's buffer,
flushed every few seconds by a thread of each process. On ECS the awslogs
driver ships stdout to CloudWatch Logs, which turns the EMF into metrics.
POWERTOOLS_METRICS_DISABLED=true (the local stack sets it) keeps them quiet.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

from atf_core.schema import Task
from atf_core.telemetry import WORKER_SERVICE, MetricBuffer

SERVICE_ENV = "POWERTOOLS_SERVICE_NAME"
TASK_KEYS = ("task_id", "attempt", "lambda", "priority", "collection")
_formatter = LambdaPowertoolsFormatter()


def service_name() -> str:
    return os.environ.get(SERVICE_ENV) or WORKER_SERVICE


def setup_logging(level: int = logging.INFO, stream: TextIO | None = None) -> None:
    """Send every logger's lines to stdout as Powertools JSON (replacing a basicConfig)."""
    global _formatter
    _formatter = LambdaPowertoolsFormatter(service=service_name())
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.setFormatter(_formatter)
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level)


@contextmanager
def task_context(task: Task) -> Iterator[None]:
    """The task's keys on every line this thread logs until the block ends."""
    _formatter.thread_safe_append_keys(
        task_id=task.id, attempt=task.attempt, collection=task.collection, priority=task.priority,
        **{"lambda": task.lambda_},
    )  # fmt: skip
    try:
        yield
    finally:
        _formatter.thread_safe_remove_keys(TASK_KEYS)


def worker_metrics() -> MetricBuffer:
    """A started buffer under the worker's service name; close() it on the way out."""
    return MetricBuffer(service=service_name()).start()
