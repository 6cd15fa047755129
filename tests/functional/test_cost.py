"""What one task's lifecycle costs in DynamoDB write units, billed by AWS's rules."""

from __future__ import annotations

from datetime import timedelta

from atf_core import lifecycle
from atf_core.aws import make_clients
from atf_core.billing import CostMeter, index_write_units, item_size, write_units
from atf_core.config import StackConfig
from atf_core.consumer import Consumer
from atf_core.queues import QueueDirectory, TaskMessage
from atf_core.scheduling import Scheduling
from atf_core.schema import ScheduleRequest
from atf_core.store.base import Change, TaskRef
from atf_core.store.dynamo import DynamoTaskStore
from tests.functional.helpers import T0


def test_billing_rules_follow_the_developer_guide() -> None:
    small = {"id": {"S": "x"}, "gs": {"S": "n#a"}, "nt": {"N": "1"}, "l": {"S": "a"}}
    moved = {**small, "nt": {"N": "2"}}
    assert item_size({"ab": {"S": "xyz"}}) == 5
    assert write_units(None, small) == 1 and write_units(small, {"id": {"S": "x" * 2000}}) == 2
    assert index_write_units(None, small) == 1  # add
    assert index_write_units(small, moved) == 2  # key change: delete + put
    assert index_write_units(small, {**small, "s": {"S": "x"}}) == 0  # nothing the index holds
    assert index_write_units(small, {**small, "l": {"S": "b"}}) == 1  # projected attribute
    assert index_write_units(small, {"id": {"S": "x"}}) == 1  # removed


def test_the_happy_path_costs_six_write_units(aws, config: StackConfig) -> None:  # type: ignore[no-untyped-def]
    # Given every call of the framework metered, the item read before each write by an unmetered client
    metered = make_clients(endpoint_url=None)
    meter = CostMeter(reader=aws.dynamodb)
    for client in (metered.dynamodb, metered.sqs):
        meter.attach(client)
    store = DynamoTaskStore(metered.dynamodb, config)
    now = T0
    # When a task is scheduled, enqueued by the consumer, claimed and succeeds
    task = (
        Scheduling(store, config)
        .schedule(ScheduleRequest.model_validate({"lambda": "work", "payload": {"to": "a@b.c"}}), now)
        .task
    )
    Consumer(store, metered.sqs, config, clock=lambda: now + timedelta(seconds=1)).poll()
    url = QueueDirectory(metered.sqs, config).url("work", "normal")
    [raw] = metered.sqs.receive_message(QueueUrl=url)["Messages"]
    message = TaskMessage.decode(raw["Body"])
    claimed = store.transition(TaskRef.of(task), lifecycle.CLAIM, Change(now=now, attempt=message.attempt))
    assert claimed.applied
    assert store.transition(TaskRef.of(task), lifecycle.SUCCEED, Change(now=now, attempt=1)).applied
    # Then the writes cost 2 (put + index add) + 1 (enqueue) + 1 (claim) + 2 (success + index removal)
    assert meter.bill.write_units == 6
    assert meter.bill.calls["dynamodb.UpdateItem"] == 3
