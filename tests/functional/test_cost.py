"""What one task's lifecycle costs in DynamoDB write units, billed by AWS's rules."""

from __future__ import annotations

from datetime import timedelta

import pytest

from atf_core import lifecycle
from atf_core.aws import make_clients
from atf_core.config import KeyLimits, StackConfig
from atf_core.consumer import Consumer
from atf_core.queues import QueueDirectory, TaskMessage
from atf_core.schema import ScheduleRequest
from atf_core.store.base import Change, TaskRef
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling
from atf_local.cost.billing import CostMeter, index_write_units, item_size, write_units
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


@pytest.mark.parametrize(
    ("record_enqueued", "units", "updates"),
    [(False, 5, 2), (True, 6, 3)],
    ids=["send-without-writing", "record-enqueued"],
)
def test_the_happy_path_write_units(  # type: ignore[no-untyped-def]
    aws, config: StackConfig, record_enqueued: bool, units: int, updates: int
) -> None:
    # Given every call of the framework metered, the item read before each write by an unmetered client
    config = config.model_copy(update={"record_enqueued": record_enqueued})
    metered = make_clients(endpoint_url=None)
    meter = CostMeter(reader=aws.dynamodb)
    for client in (metered.dynamodb, metered.sqs):
        meter.attach(client)
    store = DynamoTaskStore(metered.dynamodb, config)
    now = T0
    # When a task is scheduled, sent by the consumer, claimed and succeeds
    task = (
        Scheduling(store, config)
        .schedule(ScheduleRequest.model_validate({"lambda": "work", "payload": {"to": "a@b.c"}}), now)
        .task
    )
    Consumer(store, metered.sqs, config, clock=lambda: now + timedelta(seconds=1)).poll()
    url = QueueDirectory(metered.sqs, config).url("work", "normal")
    [raw] = metered.sqs.receive_message(QueueUrl=url)["Messages"]
    message = TaskMessage.decode(raw["Body"])
    change = Change(now=now, attempt=message.attempt, entry_ms=message.due_ms)
    assert store.transition(TaskRef.of(task), lifecycle.CLAIM, change).applied
    assert store.transition(TaskRef.of(task), lifecycle.SUCCEED, Change(now=now, attempt=1)).applied
    # Then the writes cost 2 (put + index add) + 1 (claim) + 2 (success + index removal),
    # and 1 more when the consumer records the task as enqueued instead of reading it
    assert meter.bill.write_units == units
    assert meter.bill.calls["dynamodb.UpdateItem"] == updates
    # the unrecording consumer's read of the task: eventually consistent, half a unit
    assert meter.bill.calls.get("dynamodb.BatchGetItem", 0) == (0 if record_enqueued else 1)
    assert meter.bill.detail.get("dynamodb.BatchGetItem/read_units", 0) == (0 if record_enqueued else 0.5)


def test_a_transaction_bills_each_item_twice_and_its_index_once(aws, config: StackConfig) -> None:  # type: ignore[no-untyped-def]
    # Given a singleton flow key (its schedule is a transaction) and every call metered
    spec = config.lambdas["work"].model_copy(update={"key_limits": KeyLimits(singleton=True)})
    config = config.model_copy(update={"lambdas": {**config.lambdas, "work": spec}})
    metered = make_clients(endpoint_url=None)
    meter = CostMeter(reader=aws.dynamodb)
    meter.attach(metered.dynamodb)
    scheduling = Scheduling(DynamoTaskStore(metered.dynamodb, config), config)
    body = {"lambda": "work", "flow_key": "a", "on_conflict": "replace"}
    # When a task takes the key, then a second replaces it
    scheduling.schedule(ScheduleRequest.model_validate(body), T0)
    taken = meter.snapshot().write_units
    scheduling.schedule(ScheduleRequest.model_validate(body), T0)
    # Then taking costs 2x(task) + 1 (index add) + 2x(holder) = 5, replacing 5 + 2x(cancel) + 1 (index removal)
    assert (taken, meter.snapshot().write_units - taken) == (5, 8)
    assert meter.bill.calls["dynamodb.TransactWriteItems"] == 2


def test_a_debounced_merge_bills_one_amend_and_with_a_key_a_transaction(aws, config: StackConfig) -> None:  # type: ignore[no-untyped-def]
    # Given a debounced flow key and every call metered
    limits = KeyLimits.model_validate({"debounce": {"quiet_seconds": 5, "max_delay_seconds": 60}})
    spec = config.lambdas["work"].model_copy(update={"key_limits": limits})
    config = config.model_copy(update={"lambdas": {**config.lambdas, "work": spec}})
    metered = make_clients(endpoint_url=None)
    meter = CostMeter(reader=aws.dynamodb)
    meter.attach(metered.dynamodb)
    scheduling = Scheduling(DynamoTaskStore(metered.dynamodb, config), config)
    body = {"lambda": "work", "flow_key": "a"}
    scheduling.schedule(ScheduleRequest.model_validate(body), T0)
    # When a request is merged into the waiting task, then one with an idempotency key
    before = meter.snapshot()
    scheduling.schedule(ScheduleRequest.model_validate({**body, "payload": {"n": 2}}), T0 + timedelta(seconds=1))
    merged = meter.snapshot()
    keyed = {**body, "payload": {"n": 3}, "key": "k"}
    scheduling.schedule(ScheduleRequest.model_validate(keyed), T0 + timedelta(seconds=2))
    # Then a merge is 1 (the task's update) + 2 (its entry moves), after two consistent reads (holder, task);
    # with a key, a transaction: 2x(task) + 2 (entry) + 2x(record) = 6, after two more reads (the key's id)
    assert merged.write_units - before.write_units == 3
    assert meter.bill.write_units - merged.write_units == 6
    assert merged.calls["dynamodb.GetItem"] - before.calls.get("dynamodb.GetItem", 0) == 2
    assert meter.bill.calls["dynamodb.GetItem"] - merged.calls["dynamodb.GetItem"] == 4
    assert meter.bill.calls["dynamodb.TransactWriteItems"] == 2  # the first task's, and the keyed merge
