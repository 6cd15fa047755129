"""A poll reads each index partition from a small first page that grows, so a backlog is not read (and billed
on DynamoDB) a whole page per partition at every pass."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from atf_core.config import StackConfig
from atf_core.consumer import Consumer, Event
from atf_core.lifecycle import Assoc
from atf_core.store import codec
from atf_core.store.index import IndexStore
from atf_core.store.tasks import DynamoTaskStore
from tests.functional.helpers import T0, new_task


def _queries(client: Any) -> list[dict[str, Any]]:
    """Each Query the client sends from now on: its Limit and how many entries its page held."""
    seen: list[dict[str, Any]] = []

    def sent(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["query"] = {"limit": params.get("Limit"), "count": None}  # a poll sends some on other threads
        seen.append(context["query"])

    def answered(parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["query"]["count"] = parsed.get("Count")

    client.meta.events.register("provide-client-params.dynamodb.Query", sent)
    client.meta.events.register("after-call.dynamodb.Query", answered)
    return seen


def test_a_partition_read_from_a_small_first_page_yields_every_entry_in_order(aws: Any, config: StackConfig) -> None:
    # Given 130 due tasks in one partition, and pages of at most 50
    config = config.model_copy(update={"shards": 1})
    store = DynamoTaskStore(aws.dynamodb, config)
    tasks = [new_task(store, config, now=T0 + timedelta(milliseconds=n)) for n in range(130)]
    partition = codec.index_partition(Assoc.NEW, "work", "normal", 0)
    index = IndexStore(aws.dynamodb, config.table_name, page_size=50)
    queries = _queries(aws.dynamodb)
    # When the partition is read from a first page of 10
    read = [entry.id for entry in index.due(partition, T0 + timedelta(seconds=1), first_page=10)]
    # Then every entry comes, oldest first, in pages of 10, 20, 40, then 50 at most
    assert read == [task.id for task in tasks]
    assert [q["limit"] for q in queries] == [10, 20, 40, 50, 50]
    # And without a first page, each page is a whole one
    queries.clear()
    assert len(list(index.due(partition, T0 + timedelta(seconds=1)))) == 130
    assert [q["limit"] for q in queries] == [50, 50, 50]


def test_a_poll_beside_a_backlog_reads_about_its_window_not_a_page_per_partition(aws: Any, config: StackConfig) -> None:
    # Given 8 shards (16 partitions with the started ones) holding 400 due tasks, pages of 200, and 50 a pass
    config = config.model_copy(update={"shards": 8, "page_size": 200, "enqueue_per_poll": 50})
    store = DynamoTaskStore(aws.dynamodb, config)
    for n in range(400):
        new_task(store, config, now=T0 + timedelta(milliseconds=n))
    consumer = Consumer(store, aws.sqs, config, clock=lambda: T0 + timedelta(seconds=1))
    queries = _queries(aws.dynamodb)
    # When one pass runs
    report = consumer.poll()
    # Then it sends its 50, having read each partition's first page of 25 (twice its share of a window of
    # 200), not the 400 entries a first page of 200 per partition would have read
    assert report.total(Event.ENQUEUED) == 50
    index_reads = [q for q in queries if q["limit"] is not None]
    assert {q["limit"] for q in index_reads} <= {25, 50}
    assert sum(q["count"] for q in index_reads) <= 16 * 25
