"""The store consumer's Lambda: ticked each minute, it polls for a little under a minute (tick.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from atf_core.aws import AwsClients, make_clients
from atf_core.chains import Chains
from atf_core.clock import process_clock
from atf_core.config import StackConfig
from atf_core.consumer import Consumer, Event, PollReport, run_until
from atf_core.consumer.consumer import ConsumerGroup, Housekeeping
from atf_core.consumer.due_soon import DueSoon
from atf_core.consumer.tick import NEXT_START_S, time_to_poll
from atf_core.consumer.wake import QueueWake
from atf_core.periodic_schedules import Schedules
from atf_core.queues import QueueDirectory
from atf_core.store.index import IndexStore
from atf_core.store.items import ItemStore
from atf_core.store.tasks import DynamoTaskStore
from atf_core.telemetry import CONSUMER_SERVICE, Dimension, Metric, MetricBuffer, queue, watch_throttles

logger = Logger(service="atf-consumer")
tracer = Tracer(service="atf-consumer")
# One invocation polls for a minute and sees every (lambda, priority): the buffer
# flushes a document per dimension set every few seconds rather than once at the end.
metrics = MetricBuffer(service=CONSUMER_SERVICE)
# The metric each per-queue event of a poll counts; errors and failed sends add up to one stack-wide metric.
PER_QUEUE = {
    Event.ENQUEUED: Metric.ENQUEUED,
    Event.REQUEUED: Metric.REQUEUED,
    Event.DROPPED: Metric.DROPPED,
    Event.EXHAUSTED: Metric.EXHAUSTED,
    Event.DEAD_LETTERED: Metric.DEAD_LETTERED,
    Event.EXPIRED: Metric.EXPIRED,
}
ERRORS = (Event.ERROR, Event.SEND_FAILED, Event.HOUSEKEEPING_FAILED)


@cache
def _config() -> StackConfig:
    return StackConfig.from_env()


@cache
def _clients() -> AwsClients:
    clients = make_clients()
    for client in (clients.dynamodb, clients.sqs):
        watch_throttles(client, lambda _: metrics.count(Metric.THROTTLES))
    return clients


@cache
def _consumer(index: int, of: int) -> Consumer:
    # Built once per group and kept while the Lambda is warm, so the in-flight
    # tracker carries over from one tick to the next.
    clients = _clients()
    config = _config()
    store = DynamoTaskStore(clients.dynamodb, config)
    items = ItemStore(clients.dynamodb, config.table_name)
    queues = QueueDirectory(clients.sqs, config)
    chores: list[Housekeeping] = []
    if index == 0:  # one group does the chores (a second one would only be redundant)
        chains = Chains(store, items, config, clock=process_clock)

        def sweep_chains(now: datetime, _lookahead: float) -> None:
            chains.sweep(now)

        schedules = Schedules(store, items, config, clock=process_clock)
        chores = [schedules.fire_due, sweep_chains, QueueWake(queues, config).wake]
    group = ConsumerGroup(index, of)
    return Consumer(store, clients.sqs, config, group, clock=process_clock, housekeeping=chores, queues=queues)


@cache
def _due_soon(index: int, of: int) -> DueSoon:
    config = _config()
    return DueSoon(IndexStore(_clients().dynamodb, config.table_name), config, ConsumerGroup(index, of))


def publish_due_soon(due_soon: DueSoon) -> None:
    """What worker services scale ahead of; a failed count costs one data point, never the polls."""
    try:
        counts = due_soon.count(process_clock())
    except Exception:  # the scaling reads a missing point as no look-ahead, and the polls go on
        metrics.count(Metric.CONSUMER_ERRORS)
        logger.exception("counting the tasks due soon failed")
        return
    for lambda_name, due in counts.items():
        metrics.observe(Metric.TASKS_DUE_SOON, due, MetricUnit.Count.value, {Dimension.LAMBDA: lambda_name})


def record(report: PollReport, seconds: float) -> None:
    """One poll's metrics, and a log line when it did something."""
    enqueued, requeued = report.total(Event.ENQUEUED), report.total(Event.REQUEUED)
    metrics.observe(Metric.CONSUMER_LOOP_SECONDS, seconds, MetricUnit.Seconds.value)
    metrics.observe(Metric.TASKS_PER_LOOP, enqueued, MetricUnit.Count.value)
    for (event, where), count in report.counts.items():
        if event in PER_QUEUE and where is not None and count:
            metrics.count(PER_QUEUE[event], count, queue(*where))
    errors = sum(report.total(event) for event in ERRORS)
    if errors:
        metrics.count(Metric.CONSUMER_ERRORS, errors)
    if chores_failed := report.total(Event.HOUSEKEEPING_FAILED):
        metrics.count(Metric.HOUSEKEEPING_FAILURES, chores_failed)  # alarmed: periodic tasks or chains are stuck
    if enqueued or requeued or errors:
        logger.info("poll", extra={"enqueued": enqueued, "requeued": requeued, "errors": errors, "seconds": seconds})
    metrics.flush_if_due()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    started = time.monotonic()  # the invocation polls for tick.RUN_S from here
    group = event.get("group") or {}
    index, of = int(group.get("index", 0)), int(group.get("of", 1))
    consumer = _consumer(index, of)
    try:
        polls = run_until(
            consumer,
            left_s=time_to_poll(lambda: context.get_remaining_time_in_millis() / 1000, started),
            poll_interval=_config().poll_interval,
            on_poll=recorded_then_due_soon(_due_soon(index, of)),
            should_stop=lambda: context.get_remaining_time_in_millis() <= 0,  # the local runner's stop
            on_error=poll_failed,
            next_start_s=NEXT_START_S,
        )
    finally:
        metrics.flush()
    return {"polls": polls}


def recorded_then_due_soon(due_soon: DueSoon) -> Callable[[PollReport, float], None]:
    """Each poll recorded; after the first, the tasks due soon counted: before it, their reads would hold back
    the invocation's first poll, which the last poll of the one before reads ahead to cover (tick.py)."""
    published = False

    def on_poll(report: PollReport, seconds: float) -> None:
        nonlocal published
        record(report, seconds)
        if not published:
            published = True
            publish_due_soon(due_soon)

    return on_poll


def poll_failed(error: Exception) -> None:
    """A poll that raised (say the gates could not be read): counted and logged; the loop polls again."""
    metrics.count(Metric.CONSUMER_ERRORS)
    logger.error("poll failed", exc_info=error)
