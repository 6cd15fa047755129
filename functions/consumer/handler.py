"""The store consumer's Lambda: ticked each minute, it polls until the minute is nearly over."""

from __future__ import annotations

import warnings
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from atf_core.aws import make_clients
from atf_core.chains import Chains
from atf_core.config import StackConfig
from atf_core.consumer import Consumer, PollReport, run_until
from atf_core.consumer.consumer import ConsumerGroup
from atf_core.history import History, recorded
from atf_core.schedules import Schedules
from atf_core.store.dynamo import DynamoTaskStore
from atf_core.store.schedules import ItemStore

# A poll that found nothing to do is normal, not worth a warning per invocation.
warnings.filterwarnings("ignore", message="No application metrics to publish")
logger = Logger(service="atf-consumer")
metrics = Metrics(namespace="ATF", service="consumer")
tracer = Tracer(service="atf-consumer")


@cache
def _config() -> StackConfig:
    return StackConfig.from_env()


@cache
def _consumer(index: int, of: int) -> Consumer:
    # Built once per group and kept while the Lambda is warm, so the in-flight
    # tracker carries over from one tick to the next.
    clients = make_clients()
    config = _config()
    store = recorded(DynamoTaskStore(clients.dynamodb, config), History.from_env("consumer"))
    items = ItemStore(clients.dynamodb, config.table_name)
    chores = []
    if index == 0:  # one group fires schedules and sweeps chains (a second one would only be redundant)
        chores = [Schedules(store, items, config).fire_due, lambda now, _: Chains(store, items, config).sweep(now)]
    return Consumer(store, clients.sqs, config, ConsumerGroup(index, of), housekeeping=chores)


def _record(report: PollReport, seconds: float) -> None:
    metrics.add_metric(name="ConsumerLoopSeconds", unit=MetricUnit.Seconds, value=seconds)
    metrics.add_metric(name="TasksPerLoop", unit=MetricUnit.Count, value=report.enqueued)
    for name, value in (("Requeued", report.requeued), ("Dropped", report.dropped), ("Exhausted", report.exhausted)):
        if value:
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
    if report.enqueued or report.requeued:
        logger.info("poll", extra={"enqueued": report.enqueued, "requeued": report.requeued, "seconds": seconds})


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    group = event.get("group") or {}
    consumer = _consumer(int(group.get("index", 0)), int(group.get("of", 1)))
    polls = run_until(
        consumer,
        remaining_s=lambda: context.get_remaining_time_in_millis() / 1000,
        poll_interval=_config().poll_interval,
        on_poll=_record,
    )
    return {"polls": polls}
