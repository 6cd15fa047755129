"""One trace from `schedule()` to the callback, through OpenTelemetry when it is installed.

The caller's span context travels with the task as a W3C `traceparent` (55 characters, kept in the task's item): the
SDK's span for the API call is its parent, and the frontend's handling, the claim and each attempt's execution are
spans of that trace, each carrying the task id and attempt. A task may wait a year between them, so they are children
of the scheduling span rather than of one another. The consumer's send is a span of its own invocation's trace
carrying the task ids and attempts of each batch: the index it reads holds no trace context (adding it to the index
projection would rebuild the index on every deployed stack).

OpenTelemetry stays optional: nothing here imports it unless it is installed, and with only its API installed (no SDK
configured) every span is a no-op. A team's process configures its own provider and exporter, as with any library.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from atf_core.schema import Task

TRACEPARENT_PATTERN = r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"
TRACER_NAME = "atf"
# Span attribute names, one definition for every component that sets them.
TASK_ID = "atf.task.id"
TASK_IDS = "atf.task.ids"
ATTEMPT = "atf.task.attempt"
ATTEMPTS = "atf.task.attempts"
LAMBDA = "atf.lambda"
PRIORITY = "atf.priority"
BATCH_SIZE = "atf.batch.size"

Kind = Literal["CLIENT", "SERVER", "PRODUCER", "CONSUMER", "INTERNAL"]
Value = str | int | list[str] | list[int]
Attributes = dict[str, Value]


def of_task(task: Task) -> Attributes:
    return {TASK_ID: task.id, ATTEMPT: task.attempt, LAMBDA: task.lambda_}


@functools.cache
def installed() -> bool:
    return importlib.util.find_spec("opentelemetry") is not None


@dataclass
class Traced:
    """The span under way, to name what is learnt while it runs (a task's id once it is created)."""

    traceparent: str | None = None
    span: Any = None

    def set(self, name: str, value: Value) -> None:
        if self.span is not None:
            self.span.set_attribute(name, value)


@contextmanager
def span(name: str, kind: Kind, attributes: Attributes, *, parent: str | None = None) -> Iterator[Traced]:
    """A span, current while the block runs, child of `parent` (a traceparent) or else of the current span.
    An exception that leaves the block is recorded on it and marks it an error."""
    if not installed():
        yield Traced()
        return
    from opentelemetry import trace

    context = _extracted(parent) if parent else None
    tracer = trace.get_tracer(TRACER_NAME)
    # The exception is recorded here, not by OpenTelemetry: its record calls str() on it, and one whose __str__
    # raises (a team's exception class) would leave the block as that error instead of its own.
    with tracer.start_as_current_span(
        name,
        context=context,
        kind=trace.SpanKind[kind],
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as now:
        try:
            yield Traced(_traceparent_of(now), now)
        except BaseException as error:
            _failed(now, error)
            raise


@contextmanager
def outgoing(name: str, attributes: Attributes) -> Iterator[Traced]:
    """A client span around a call that may suspend (the SDK's plans yield to an asyncio driver between steps), so
    it is not made current: attaching a context in one step and detaching it in another would not pair up."""
    if not installed():
        yield Traced()
        return
    from opentelemetry import trace

    started = trace.get_tracer(TRACER_NAME).start_span(name, kind=trace.SpanKind.CLIENT, attributes=attributes)
    try:
        yield Traced(_traceparent_of(started), started)
    except BaseException as error:
        _failed(started, error)
        raise
    finally:
        started.end()


def _failed(span: Any, error: BaseException) -> None:
    """Mark a span failed by `error`; one whose message cannot be read is named by its class alone."""
    from opentelemetry.trace import Status, StatusCode

    try:
        span.record_exception(error)
        span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
    except Exception:  # noqa: BLE001 - its __str__ raised: the span must not replace the error it records
        span.set_status(Status(StatusCode.ERROR, type(error).__name__))


def record(name: str, kind: Kind, attributes: Attributes, *, parent: str | None, started_ns: int) -> None:
    """A span for work already done, whose parent was learnt only at its end (a claim learns its task's trace
    context from the write's answer)."""
    if not installed():
        return
    from opentelemetry import trace

    context = _extracted(parent) if parent else None
    tracer = trace.get_tracer(TRACER_NAME)
    tracer.start_span(
        name, context=context, kind=trace.SpanKind[kind], attributes=attributes, start_time=started_ns
    ).end()


def _extracted(traceparent: str) -> Any:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract({"traceparent": traceparent})


def _traceparent_of(current: Any) -> str | None:
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier, context=trace.set_span_in_context(current))
    return carrier.get("traceparent")  # none when the span is not recorded and has no valid context
