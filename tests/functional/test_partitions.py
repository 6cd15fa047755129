"""atf_local.partitions keeps every item filed by its index hash key through every kind of write moto takes:
index Queries answer as moto alone (which passes over the whole table) after puts, deletes, updates that move
an item between partitions, refused updates, batches, committed and cancelled transactions, a restore, and
while writes run on another thread."""

from __future__ import annotations

import copy
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from atf_core.config import StackConfig
from atf_core.definitions import INDEX_NAME
from atf_local import partitions
from tests.functional.test_fast_query import (
    PARTITIONS,
    _backend_tables,
    _pages,
    _task,
    _write,
    moto_alone,
    moto_tables,
)

Write = Callable[[Any, StackConfig, random.Random], None]


@pytest.fixture
def db(config: StackConfig, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    yield from moto_tables(config, monkeypatch)


def _answers(db: Any, config: StackConfig) -> list[Any]:
    """Every index partition's Query, page after page."""
    requests = [
        {
            "TableName": config.table_name,
            "IndexName": INDEX_NAME,
            "KeyConditionExpression": "gs = :p",
            "ExpressionAttributeValues": {":p": {"S": partition}},
        }
        for partition in PARTITIONS
    ]
    return [_pages(db, request) for request in requests]


def _answer_as_moto_alone(db: Any, config: StackConfig) -> None:
    with moto_alone():
        expected = _answers(db, config)
    assert _answers(db, config) == expected
    assert any(page["Count"] for pages in expected for page in pages), "every partition empty: nothing compared"


def _move(config: StackConfig, rng: random.Random, task: int | None = None) -> dict[str, Any]:
    """An Update moving a task to a partition (or out of the index)."""
    task = rng.randrange(40) if task is None else task
    update: dict[str, Any] = {"TableName": config.table_name, "Key": {"id": {"S": f"t{task}"}}}
    if rng.random() < 0.8:
        update["UpdateExpression"] = "SET gs = :p, nt = :n"
        update["ExpressionAttributeValues"] = {":p": {"S": rng.choice(PARTITIONS)}, ":n": {"N": str(rng.randrange(50))}}
    else:
        update["UpdateExpression"] = "REMOVE gs"
    return update


def _transaction(db: Any, config: StackConfig, rng: random.Random, cancelled: bool) -> None:
    moved, put, deleted = rng.sample(range(40), 3)
    entries: list[dict[str, Any]] = [
        {"Update": _move(config, rng, moved)},
        {"Put": {"TableName": config.table_name, "Item": {**_task(rng), "id": {"S": f"t{put}"}}}},
        {"Delete": {"TableName": config.table_name, "Key": {"id": {"S": f"t{deleted}"}}}},
    ]
    if cancelled:  # a condition on an item no write creates: moto puts back its copy of the whole table
        never = {"id": {"S": "never"}}
        entries.append({"ConditionCheck": {"TableName": config.table_name, "Key": never,
                                           "ConditionExpression": "attribute_exists(id)"}})  # fmt: skip
        with pytest.raises(db.exceptions.TransactionCanceledException):
            db.transact_write_items(TransactItems=entries)
    else:
        db.transact_write_items(TransactItems=entries)


def _committed(db: Any, config: StackConfig, rng: random.Random) -> None:
    _transaction(db, config, rng, cancelled=False)


def _cancelled(db: Any, config: StackConfig, rng: random.Random) -> None:
    _transaction(db, config, rng, cancelled=True)


def _refused_update(db: Any, config: StackConfig, rng: random.Random) -> None:
    db.put_item(TableName=config.table_name, Item={**_task(rng), "id": {"S": "t7"}})
    move = {**_move(config, rng, 7), "ConditionExpression": "attribute_not_exists(id)"}
    with pytest.raises(db.exceptions.ConditionalCheckFailedException):
        db.update_item(**move)


def _batch(db: Any, config: StackConfig, rng: random.Random) -> None:
    puts = {f"t{n}": {"PutRequest": {"Item": {**_task(rng), "id": {"S": f"t{n}"}}}} for n in rng.sample(range(40), 5)}
    deletes = [{"DeleteRequest": {"Key": {"id": {"S": f"t{n}"}}}} for n in range(40) if f"t{n}" not in puts][:3]
    db.batch_write_item(RequestItems={config.table_name: [*puts.values(), *deletes]})


def _update(db: Any, config: StackConfig, rng: random.Random) -> None:
    db.update_item(**_move(config, rng))


def _any_write(db: Any, config: StackConfig, rng: random.Random) -> None:
    _write(db, rng, config)


@pytest.mark.parametrize("write", [_update, _refused_update, _batch, _committed, _cancelled, _any_write])
def test_every_kind_of_write_keeps_the_partitions_as_moto_alone_finds_them(
    db: Any, config: StackConfig, write: Write
) -> None:
    rng = random.Random(write.__name__)
    for _ in range(60):  # a table with items in every partition, filed by a first Query
        _write(db, rng, config, delete=False)
    _answer_as_moto_alone(db, config)
    for _ in range(8):
        for _ in range(5):
            write(db, config, rng)
        _answer_as_moto_alone(db, config)


def test_a_restored_table_is_filed_anew(db: Any, config: StackConfig) -> None:
    """moto's restore replaces a table's dict of items: the filing of the dict it replaced answers no more."""
    rng = random.Random(3)
    for _ in range(60):
        _write(db, rng, config, delete=False)
    _answer_as_moto_alone(db, config)
    table = _backend_tables()[config.table_name]
    restored = copy.copy(table.items)  # as a restore from an older backup: half the items gone
    for hash_key in list(restored)[::2]:
        del restored[hash_key]
    table.items = restored
    _answer_as_moto_alone(db, config)


@pytest.mark.parametrize("run", range(5))
def test_filings_built_while_writes_run_miss_no_write(db: Any, config: StackConfig, run: int) -> None:
    """Each Query files the table anew (its filing is dropped first) while another thread moves tasks
    between partitions: once the writes are over, every partition answers as moto alone."""
    rng = random.Random(run)
    for _ in range(60):
        _write(db, rng, config, delete=False)
    table = _backend_tables()[config.table_name]
    done, builds = threading.Event(), 0

    def writes() -> None:
        writer = random.Random(run + 100)
        try:
            for _ in range(150):
                db.update_item(**_move(config, writer))
                time.sleep(0.001)  # room for the reader
        finally:
            done.set()

    thread = threading.Thread(target=writes)
    thread.start()
    while not done.is_set():
        partitions._filings.pop(table, None)
        _answers(db, config)
        builds += 1
        time.sleep(0.001)  # room for the writer: a lock taken again at once is taken again before it wakes
    thread.join()
    assert builds > 1
    _answer_as_moto_alone(db, config)


def test_a_write_landing_while_a_table_is_filed_is_filed_after_it(
    db: Any, config: StackConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A put on another thread lands between the filing's read of the table and its filing of the items read
    (the test above leaves that moment to chance): it waits for the filing, then files its item."""
    rng = random.Random(4)
    for _ in range(60):
        _write(db, rng, config, delete=False)
    table = _backend_tables()[config.table_name]
    stored = next(item for item in partitions.every_item(table) if item.attrs.get("gs"))
    elsewhere = next(p for p in PARTITIONS if p != stored.attrs["gs"].value)
    replacement = {**_task(rng), "id": {"S": stored.hash_key.value}, "gs": {"S": elsewhere}, "nt": {"N": "1"}}
    writer = threading.Thread(target=db.put_item, kwargs={"TableName": config.table_name, "Item": replacement})
    read_table = partitions.every_item

    def a_put_lands(table: Any) -> list[Any]:
        items = read_table(table)
        writer.start()
        writer.join(timeout=0.5)  # the put is over here unless it waits for the filing
        return items

    partitions._filings.pop(table, None)
    monkeypatch.setattr(partitions, "every_item", a_put_lands)
    _answers(db, config)
    monkeypatch.undo()
    writer.join()
    _answer_as_moto_alone(db, config)
