"""One trace from schedule() to the callback (atf_core.tracing), read back with OpenTelemetry's in-memory exporter.

The SDK client, the frontend (the local API server runs it in this process), the consumer, a controller's claim and
an executor's TaskRunner all run here, on the package's local stack, so every span they make reaches one exporter.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from atf_core import tracing
from atf_core.aws import make_clients
from atf_core.consumer import Consumer
from atf_core.queues import TaskMessage
from atf_core.schema import TaskStatus, utcnow
from atf_core.store.tasks import DynamoTaskStore
from atf_core.telemetry import WORKER_SERVICE, MetricBuffer
from atf_local.stack import LocalStack
from atf_sdk.client import AtfClient
from atf_sdk.worker.buffers import Buffered
from atf_sdk.worker.controller import Controller
from atf_sdk.worker.executor import build_runner
from atf_sdk.worker.registry import Retry, TaskContext

LAMBDA = "traced"


class _Switch(SpanProcessor):
    """Passes spans on while on. The global provider can be set once a process, and shutting it down makes every
    later span log a warning into the other tests' logs: so this module's spans are switched off instead."""

    def __init__(self, inner: SpanProcessor) -> None:
        self.inner, self.on = inner, True

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self.on:
            self.inner.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if self.on:
            self.inner.on_end(span)


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    switch = _Switch(SimpleSpanProcessor(memory))
    provider = TracerProvider()
    provider.add_span_processor(switch)
    trace.set_tracer_provider(provider)
    yield memory
    switch.on = False
    memory.clear()


def _run_once(stack: LocalStack, callback: Any) -> None:
    """The consumer sends what is due; a controller claims it; the executor's runner runs it. All on the `traced`
    lambda alone (a configuration of it only), so that the other tests' tasks on this stack stay as they are."""
    config = stack.config.model_copy(update={"lambdas": {LAMBDA: stack.config.lambdas[LAMBDA]}})
    clients = make_clients(stack.endpoint)
    store = DynamoTaskStore(clients.dynamodb, config)
    Consumer(store, clients.sqs, config).poll()
    metrics = MetricBuffer(service=WORKER_SERVICE)
    sqs, long_poll = clients.sqs, clients.sqs_long_poll
    controller = Controller(store, sqs, long_poll, config, [LAMBDA], store_client=clients.dynamodb, metrics=metrics)
    runner = build_runner(clients, config, LAMBDA, callback, metrics, utcnow)
    url = controller.queue_url(LAMBDA, "normal")
    try:
        received = clients.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        for raw in received.get("Messages", []):
            message = TaskMessage.decode(raw["Body"])
            task = controller.claim(LAMBDA, Buffered(0, message.due_ms, 0, message, url, raw["ReceiptHandle"]))
            if task is not None:
                runner.run(task)
    finally:
        controller.drain()


def _named(spans: tuple[ReadableSpan, ...], name: str, task_id: str) -> list[ReadableSpan]:
    def ids(span: ReadableSpan) -> list[str]:
        attributes = span.attributes or {}
        return [str(attributes.get(tracing.TASK_ID))] + [str(i) for i in attributes.get(tracing.TASK_IDS, ())]

    return [span for span in spans if span.name == name and task_id in ids(span)]


def test_one_trace_from_schedule_to_the_callback(
    exporter: InMemorySpanExporter, stack: LocalStack, client: AtfClient
) -> None:
    # Given a caller's span, and a callback that fails its first attempt and records the span it runs in
    exporter.clear()
    seen: list[tuple[int, int]] = []

    def callback(task: TaskContext) -> None:
        current = trace.get_current_span().get_span_context()
        seen.append((current.trace_id, task.attempt))
        if task.attempt == 1:
            raise Retry("once more", after=0)

    with trace.get_tracer("a team's service").start_as_current_span("checkout") as checkout:
        # When the caller schedules a task, and it runs twice
        task_id = client.schedule(LAMBDA, {"order": 7}).id
    _run_once(stack, callback)
    deadline = time.monotonic() + 20
    while client.get(task_id).status is not TaskStatus.SUCCESS:
        assert time.monotonic() < deadline, "the retry never ran"
        _run_once(stack, callback)
    # Then the API call, the frontend, both claims and both attempts are spans of the caller's trace
    spans = exporter.get_finished_spans()
    trace_id = checkout.get_span_context().trace_id
    sent = _named(spans, "atf schedule", task_id)
    assert [s.kind for s in sent] == [trace.SpanKind.SERVER, trace.SpanKind.CLIENT]
    client_span = sent[1]
    assert client_span.parent is not None and client_span.parent.span_id == checkout.get_span_context().span_id
    for name in ("atf schedule", "atf claim", "atf execute"):
        assert {s.context.trace_id for s in _named(spans, name, task_id)} == {trace_id}, name
    attempts = _named(spans, "atf execute", task_id)
    assert sorted((s.attributes or {})[tracing.ATTEMPT] for s in attempts) == [1, 2]
    assert all(s.parent is not None and s.parent.span_id == client_span.context.span_id for s in attempts)
    assert [s.status.status_code.name for s in sorted(attempts, key=lambda s: s.start_time or 0)] == ["ERROR", "UNSET"]
    assert sorted(seen) == [(trace_id, 1), (trace_id, 2)], "the callback ran inside its attempt's span"
    # And the consumer's sends carry the task id and attempt
    sends = _named(spans, "atf send", task_id)
    assert sends and all(task_id in (s.attributes or {})[tracing.TASK_IDS] for s in sends)


def test_a_bad_traceparent_is_refused_naming_the_field(client: AtfClient) -> None:
    from atf_core.errors import InputError

    with pytest.raises(InputError) as refused:
        client.submit({"lambda": "work", "traceparent": "not-a-trace"})
    assert refused.value.field == "traceparent"


def test_the_trace_context_is_not_part_of_the_request(exporter: InMemorySpanExporter, client: AtfClient) -> None:
    """Scheduling one key again from another span is the same request, not a conflict."""
    first = client.submit({"lambda": "work", "key": "traced-twice", "delay_seconds": 600})
    with trace.get_tracer("t").start_as_current_span("another"):  # another trace context is sent
        again = client.submit({"lambda": "work", "key": "traced-twice", "delay_seconds": 600})
    assert again.id == first.id and not again.created
