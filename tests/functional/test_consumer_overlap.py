"""The consumer's overlapped I/O against moto's server (threads need the server: in-process moto is not
thread-safe): one invocation never sends a task twice across its concurrent shards, and the per-queue depth
bound holds with many shards feeding one queue."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from atf_core.aws import AwsClients
from atf_core.config import StackConfig
from atf_core.consumer import Consumer, Event
from atf_core.queues import QueueDirectory, TaskMessage
from atf_core.schema import ScheduleRequest
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling
from bench.consumer_passes import LAMBDA, PRIORITY, embedded_aws

SHARDS = 16
TASKS = 240


def overlap_config(record_enqueued: bool = False, cap: int = 1000, per_poll: int = 100) -> StackConfig:
    return StackConfig.model_validate(
        {
            "name": "overlap",
            "table_name": "overlap-tasks",
            "shards": SHARDS,
            "record_enqueued": record_enqueued,
            "enqueue_per_poll": per_poll,
            "max_in_flight_per_queue": cap,
            "lambdas": {LAMBDA: {"priorities": [PRIORITY]}},
        }
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AwsClients]:
    with embedded_aws(overlap_config(), tmp_path_factory.mktemp("aws")) as clients:
        yield clients


def fresh(clients: AwsClients, config: StackConfig, tasks: int) -> set[str]:
    """An empty table and queue, then `tasks` tasks due now spread over the shards."""
    for name in clients.dynamodb.list_tables()["TableNames"]:
        clients.dynamodb.delete_table(TableName=name)
    for url in clients.sqs.list_queues().get("QueueUrls", []):
        clients.sqs.delete_queue(QueueUrl=url)
    from atf_local.provision import provision

    provision(clients, config)
    scheduling = Scheduling(DynamoTaskStore(clients.dynamodb, config), config)
    request = ScheduleRequest.model_validate({"lambda": LAMBDA, "payload": {}})
    return {scheduling.schedule(request).task.id for _ in range(tasks)}


def received(clients: AwsClients, config: StackConfig) -> list[str]:
    url = QueueDirectory(clients.sqs, config).url(LAMBDA, PRIORITY)
    ids: list[str] = []
    while batch := clients.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        ids += [TaskMessage.decode(raw["Body"]).task_id for raw in batch]
        entries = [{"Id": str(i), "ReceiptHandle": raw["ReceiptHandle"]} for i, raw in enumerate(batch)]
        clients.sqs.delete_message_batch(QueueUrl=url, Entries=entries)  # type: ignore[arg-type]
    return ids


def depth(clients: AwsClients, config: StackConfig) -> int:
    return QueueDirectory(clients.sqs, config).depth(LAMBDA, PRIORITY)


@pytest.mark.parametrize("record_enqueued", [False, True], ids=["send-unrecorded", "record-enqueued"])
def test_one_invocation_sends_each_task_once_across_concurrent_shards(
    server: AwsClients, tmp_path: Path, record_enqueued: bool
) -> None:
    config = overlap_config(record_enqueued)
    scheduled = fresh(server, config, TASKS)
    consumer = Consumer(DynamoTaskStore(server.dynamodb, config), server.sqs, config, io_threads=8)
    try:
        sent = 0
        for _ in range(6):  # three polls send them all (100 a poll); the others must find nothing to send
            report = consumer.poll()
            assert report.total(Event.ERROR) == 0 and report.total(Event.SEND_FAILED) == 0
            sent += report.total(Event.ENQUEUED)
    finally:
        consumer.close()
    ids = received(server, config)
    assert sent == TASKS
    assert len(ids) == len(set(ids)), "a task was sent twice"
    assert set(ids) == scheduled


def test_the_depth_bound_holds_with_many_shards_feeding_one_queue(server: AwsClients) -> None:
    cap = 30
    config = overlap_config(cap=cap, per_poll=100)  # a poll could send more than the bound allows
    fresh(server, config, 120)
    consumer = Consumer(DynamoTaskStore(server.dynamodb, config), server.sqs, config, io_threads=8)
    url = QueueDirectory(server.sqs, config).url(LAMBDA, PRIORITY)
    try:
        for _ in range(3):
            consumer.poll()
            assert depth(server, config) == cap
        # Workers take ten: once the consumer reads the depth again, ten more go out, and no more.
        taken = server.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
        entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(taken)]
        server.sqs.delete_message_batch(QueueUrl=url, Entries=entries)  # type: ignore[arg-type]
        time.sleep(2.1)  # the budget's refresh period
        for _ in range(3):
            consumer.poll()
            assert depth(server, config) == cap
    finally:
        consumer.close()
    assert len(set(received(server, config))) == cap
