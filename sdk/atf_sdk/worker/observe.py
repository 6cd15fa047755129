"""Logs and metrics of a worker host's processes.

Logs: every line, the framework's and the callbacks' own (any stdlib logger),
is one JSON object in Powertools' format on stdout, and while a task runs the
thread running it adds the task's id, attempt, lambda, priority,
collection and flow key (if it has one) to each of its lines (Powertools' thread-local keys).

An exception no code caught, in any thread, is logged the same way (one JSON
line with its traceback), never printed raw to stderr.

Metrics: CloudWatch EMF on stdout, through atf_core.telemetry's buffer,
flushed every 10 s by a thread of each process. On ECS the awslogs driver
ships stdout to CloudWatch Logs, which turns the EMF into metrics. `atf worker
--metrics` chooses: `auto` (the default) prints them unless stdout is an
interactive terminal, where they would only be noise among the log lines, or
POWERTOOLS_METRICS_DISABLED decides (the local stack sets it to true); `emf`
always; `off` never. The host's first log line says which.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from atf_core.schema import Task
from atf_core.telemetry import FLUSH_EVERY_S, WORKER_SERVICE, LogKey, MetricBuffer
from atf_sdk.extras import needs_extra

try:
    from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
    from aws_lambda_powertools.shared import constants
except ModuleNotFoundError as missing:  # atf-sdk installed without its worker extra
    raise needs_extra(missing, "a worker host (atf_sdk.worker)") from None

SERVICE_ENV = constants.SERVICE_NAME_ENV
TASK_KEYS = ("task_id", "attempt", "lambda", "priority", "collection", LogKey.FLOW_KEY)
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
    logging.getLogger("botocore").setLevel(max(level, logging.WARNING))  # not "found credentials" at each start
    threading.excepthook = _log_uncaught


def _log_uncaught(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    exc_info = (args.exc_type, args.exc_value, args.exc_traceback)
    logging.getLogger("atf").error("uncaught exception in thread %s", name, exc_info=exc_info)  # type: ignore[arg-type]


METRICS_MODES = ("auto", "emf", "off")
METRICS_DISABLED_ENV = constants.METRICS_DISABLED_ENV


def route_metrics(mode: str, stream: TextIO | None = None) -> str:
    """Turn this process's EMF on or off (executors started later get it with the host's environment); a line
    saying which."""
    from aws_lambda_powertools.metrics.functions import is_metrics_disabled

    if mode not in METRICS_MODES:
        raise ValueError(f"metrics mode {mode!r} is not one of {METRICS_MODES}")
    if mode == "auto" and (METRICS_DISABLED_ENV in os.environ or constants.POWERTOOLS_DEV_ENV in os.environ):
        enabled = not is_metrics_disabled()
        why = f"{METRICS_DISABLED_ENV}={os.environ.get(METRICS_DISABLED_ENV, '')}"
    elif mode == "auto":
        enabled = not (stream or sys.stdout).isatty()
        why = "stdout is a terminal: --metrics emf prints them" if not enabled else "stdout is not a terminal"
    else:
        enabled, why = mode == "emf", f"--metrics {mode}"
    os.environ[METRICS_DISABLED_ENV] = "false" if enabled else "true"
    return (
        f"metrics: CloudWatch EMF on stdout every {FLUSH_EVERY_S:g} s ({why})" if enabled else f"metrics: off ({why})"
    )


@contextmanager
def task_context(task: Task) -> Iterator[None]:
    """The task's keys on every line this thread logs until the block ends."""
    # A keyless task's lines carry no flow_key at all, rather than a null.
    flow_key = {LogKey.FLOW_KEY: task.flow_key} if task.flow_key is not None else {}
    _formatter.thread_safe_append_keys(
        task_id=task.id, attempt=task.attempt, collection=task.collection, priority=task.priority,
        **{"lambda": task.lambda_}, **flow_key,
    )  # fmt: skip
    try:
        yield
    finally:
        _formatter.thread_safe_remove_keys(TASK_KEYS)


def worker_metrics() -> MetricBuffer:
    """A started buffer under the worker's service name; close() it on the way out."""
    return MetricBuffer(service=service_name()).start()
