"""atf_local.fast_query changes no answer: random writes and queries, each query asked of moto as patched and as
moto alone on the same data, page after page; the two must answer alike (items, order, counts, keys). The one
difference is DynamoDB's: an index Query's 1 MB page is measured in index entries, not whole items (below)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from atf_core.config import StackConfig
from atf_core.definitions import INDEX_NAME, Attr, create_table_request
from atf_local.fast_query import fast_queries
from atf_local.partitions import every_item
from tests.conftest import moto_session

RANGED = "ranged"  # a table with a range key, an index of string keys and one with a hash key alone
HASHES = ("a", "b", "c")
PARTITIONS = ("new#work#normal#0", "new#work#normal#1", "new#work#high#0")


@contextmanager
def moto_alone() -> Iterator[None]:
    """moto's own Query and index projection while inside (fast_queries leaves every other read as moto does it)."""
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import SecondaryIndex, Table

    patched, picked, sort, cast = Table.query, SecondaryIndex.project, Table.sorted_items, DynamoType.cast_value
    Table.query = patched.__wrapped__  # type: ignore[attr-defined,method-assign]
    SecondaryIndex.project = picked.__wrapped__  # type: ignore[attr-defined,method-assign]
    Table.sorted_items = sort.__wrapped__  # type: ignore[attr-defined,method-assign]
    DynamoType.cast_value = property(cast.fget.moto)  # type: ignore[attr-defined,method-assign,union-attr]
    try:
        yield
    finally:
        Table.query = patched  # type: ignore[method-assign]
        SecondaryIndex.project = picked  # type: ignore[method-assign]
        Table.sorted_items = sort  # type: ignore[method-assign]
        DynamoType.cast_value = cast  # type: ignore[method-assign]


@pytest.fixture
def ddb(config: StackConfig, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    yield from moto_tables(config, monkeypatch)


def moto_tables(config: StackConfig, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """In-process moto, patched, with the task table and RANGED: its DynamoDB client."""
    from moto import mock_aws

    monkeypatch.delenv("ATF_AWS_ENDPOINT", raising=False)
    fast_queries()
    with mock_aws():
        client = moto_session().client("dynamodb")
        client.create_table(**create_table_request(config))
        client.create_table(**_ranged_table())
        yield client


def _ranged_table() -> dict[str, Any]:
    def index(name: str, *schema: tuple[str, str]) -> dict[str, Any]:
        keys = [{"AttributeName": attr, "KeyType": kind} for attr, kind in schema]
        return {"IndexName": name, "KeySchema": keys, "Projection": {"ProjectionType": "ALL"}}

    return {
        "TableName": RANGED,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [
            {"AttributeName": name, "AttributeType": kind}
            for name, kind in (("h", "S"), ("r", "N"), ("g", "S"), ("s", "S"))
        ],
        "KeySchema": [{"AttributeName": "h", "KeyType": "HASH"}, {"AttributeName": "r", "KeyType": "RANGE"}],
        "GlobalSecondaryIndexes": [index("by-g", ("g", "HASH"), ("s", "RANGE")), index("g-only", ("g", "HASH"))],
    }


@pytest.mark.parametrize("seed", range(4))
def test_queries_answer_as_moto_alone(ddb: Any, config: StackConfig, seed: int) -> None:
    rng = random.Random(seed)
    for step in range(120):
        if step % 4 == 3:
            for request in (_task_query(rng, config), _ranged_query(rng)):
                with moto_alone():
                    expected = _pages(ddb, request)
                assert _pages(ddb, request) == expected, request
        else:
            _write(ddb, rng, config)


def test_the_comparison_sees_an_order_moto_would_not_give(ddb: Any, config: StackConfig) -> None:
    """The test above can fail: a query whose results are left unsorted answers differently."""
    from moto.dynamodb.models.table import Table

    rng = random.Random(1)
    for _ in range(60):
        _write(ddb, rng, config, delete=False)
    request = {"TableName": config.table_name, "IndexName": INDEX_NAME, "KeyConditionExpression": "gs = :p"}
    request["ExpressionAttributeValues"] = {":p": {"S": PARTITIONS[0]}}
    with moto_alone():
        expected = _pages(ddb, request)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Table, "sorted_items", lambda self, hash_attrs, range_attrs, items: items)
        assert _pages(ddb, request) != expected


def _write(ddb: Any, rng: random.Random, config: StackConfig, delete: bool = True) -> None:
    roll = rng.random()
    if delete and roll < 0.15:
        ddb.delete_item(TableName=config.table_name, Key={"id": {"S": f"t{rng.randrange(40)}"}})
        ddb.delete_item(TableName=RANGED, Key={"h": {"S": rng.choice(HASHES)}, "r": {"N": str(rng.randrange(20))}})
    elif roll < 0.35:
        _update_task(ddb, rng, config)
    else:
        ddb.put_item(TableName=config.table_name, Item=_task(rng))
        ddb.put_item(TableName=RANGED, Item=_ranged(rng))


def _update_task(ddb: Any, rng: random.Random, config: StackConfig) -> None:
    key = {"id": {"S": f"t{rng.randrange(40)}"}}
    if rng.random() < 0.7:
        values = {":n": {"N": str(rng.randrange(50))}, ":p": {"S": rng.choice(PARTITIONS)}}
        ddb.update_item(
            TableName=config.table_name,
            Key=key,
            UpdateExpression="SET nt = :n, gs = :p",
            ExpressionAttributeValues=values,
        )
    else:
        ddb.update_item(TableName=config.table_name, Key=key, UpdateExpression="REMOVE gs, nt")


def _task(rng: random.Random) -> dict[str, Any]:
    item = {"id": {"S": f"t{rng.randrange(40)}"}, Attr.LAMBDA: {"S": rng.choice(("work", "sleepy"))}}
    item[Attr.PAYLOAD] = {"S": "x" * rng.randrange(30)}
    # some of what the index includes (numbers in more than one spelling), and some of what it leaves out
    optional = {
        Attr.FLOW_KEY: {"S": rng.choice(("A", "B"))},
        Attr.EXPIRE_AT: {"N": rng.choice(("10", "1.50", "-3", "7.0"))},
        Attr.COLLECTION: {"S": "c"},
        "tags": {"SS": ["b", "a", "c"]},
        "nested": {"M": {"n": {"N": "2"}, "l": {"L": [{"S": "x"}]}}},
    }
    item.update({name: value for name, value in optional.items() if rng.random() < 0.5})
    if rng.random() < 0.8:  # a finished task leaves the index
        item[Attr.INDEX_PK] = {"S": rng.choice(PARTITIONS)}
        item[Attr.INDEX_SK] = {"N": str(rng.randrange(50))}  # ties on the index's range key, as timestamps tie
    return item


def _ranged(rng: random.Random) -> dict[str, Any]:
    item = {"h": {"S": rng.choice(HASHES)}, "r": {"N": str(rng.randrange(20))}, "v": {"N": str(rng.randrange(5))}}
    if rng.random() < 0.8:
        item["g"] = {"S": rng.choice(("x", "y"))}
    if rng.random() < 0.8:
        item["s"] = {"S": rng.choice(("ab", "abc", "b", "ba", "c"))}
    return item


def _task_query(rng: random.Random, config: StackConfig) -> dict[str, Any]:
    low, high = sorted((rng.randrange(50), rng.randrange(50)))
    condition, values = rng.choice(
        (
            ("gs = :p", {}),
            ("gs = :p AND nt <= :h", {":h": {"N": str(high)}}),
            ("gs = :p AND nt < :h", {":h": {"N": str(high)}}),
            ("gs = :p AND nt BETWEEN :l AND :h", {":l": {"N": str(low)}, ":h": {"N": str(high)}}),
        )
    )
    request = {"TableName": config.table_name, "IndexName": INDEX_NAME, "KeyConditionExpression": condition}
    request["ExpressionAttributeValues"] = {":p": {"S": rng.choice(PARTITIONS)}, **values}
    if rng.random() < 0.3:
        request["FilterExpression"] = "#l = :lam"
        request["ExpressionAttributeNames"] = {"#l": Attr.LAMBDA}
        request["ExpressionAttributeValues"][":lam"] = {"S": "work"}
    if rng.random() < 0.3:  # the table's own key, answered from the table
        request = {"TableName": config.table_name, "KeyConditionExpression": "id = :i"}
        request["ExpressionAttributeValues"] = {":i": {"S": f"t{rng.randrange(40)}"}}
    return _paging(rng, request)


def _ranged_query(rng: random.Random) -> dict[str, Any]:
    kind = rng.randrange(3)
    if kind == 0:
        condition, values = rng.choice(
            (
                ("h = :k", {}),
                ("h = :k AND r < :a", {":a": {"N": str(rng.randrange(20))}}),
                ("h = :k AND r BETWEEN :a AND :b", {":a": {"N": "3"}, ":b": {"N": str(rng.randrange(3, 20))}}),
            )
        )
        request = {"TableName": RANGED, "KeyConditionExpression": condition}
        request["ExpressionAttributeValues"] = {":k": {"S": rng.choice(HASHES)}, **values}
    else:
        index = "by-g" if kind == 1 else "g-only"
        condition, values = ("g = :k", {})
        if kind == 1 and rng.random() < 0.6:
            condition, values = ("g = :k AND begins_with(s, :s)", {":s": {"S": rng.choice(("a", "ab", "b"))}})
        request = {"TableName": RANGED, "IndexName": index, "KeyConditionExpression": condition}
        request["ExpressionAttributeValues"] = {":k": {"S": rng.choice(("x", "y"))}, **values}
    if rng.random() < 0.3:
        request["FilterExpression"] = "v > :v"
        request["ExpressionAttributeValues"][":v"] = {"N": "1"}
    return _paging(rng, request)


def _paging(rng: random.Random, request: dict[str, Any]) -> dict[str, Any]:
    request["ScanIndexForward"] = rng.random() < 0.5
    if rng.random() < 0.7:
        request["Limit"] = rng.randrange(1, 6)
    if rng.random() < 0.15:
        request["Select"] = "COUNT"
    return request


def _pages(ddb: Any, request: dict[str, Any]) -> list[dict[str, Any]]:
    """Every page of the query, following LastEvaluatedKey, without the response metadata."""
    pages: list[dict[str, Any]] = []
    start: dict[str, Any] | None = None
    while True:
        page = ddb.query(**request, **({"ExclusiveStartKey": start} if start else {}))
        page.pop("ResponseMetadata")
        pages.append(page)
        start = page.get("LastEvaluatedKey")
        if start is None or len(pages) > 200:
            return pages


def test_an_item_written_out_of_the_index_during_a_query_is_left_out_not_a_failure(
    ddb: Any, config: StackConfig
) -> None:
    """moto's reads take no lock: an update may remove an item's index key between the Query's choice of
    candidates and its sort. DynamoDB answers with or without it; moto alone failed the Query."""
    from moto.dynamodb.models.table import Table

    rng = random.Random(2)
    for _ in range(40):
        _write(ddb, rng, config, delete=False)
    table = next(iter(_backend_tables().values()))
    items = [item for item in every_item(table) if Attr.INDEX_PK in item.attrs]
    moved = items[0]
    del moved.attrs[Attr.INDEX_PK]  # as an update between the two steps leaves it
    names = ([Attr.INDEX_PK, "id"], [Attr.INDEX_SK, None])
    with moto_alone(), pytest.raises(KeyError):
        Table.sorted_items(table, *names, list(items))
    kept = Table.sorted_items(table, *names, list(items))
    assert moved not in kept and len(kept) == len(items) - 1


def _backend_tables() -> dict[str, Any]:
    from moto.dynamodb.models import dynamodb_backends

    return dynamodb_backends["123456789012"]["us-east-1"].tables


def test_a_value_is_cast_as_moto_casts_it() -> None:
    from moto.dynamodb.models.dynamo_type import DynamoType

    fast_queries()
    values = [
        {"S": "text"}, {"S": ""}, {"N": "12"}, {"N": "-0.50"}, {"N": "1E+3"}, {"B": b"\x00bytes"}, {"BOOL": True},
        {"NULL": True}, {"SS": ["a", "b"]}, {"NS": ["1", "2.0"]}, {"L": [{"S": "x"}, {"N": "3"}]},
        {"M": {"k": {"N": "7"}, "s": {"S": "v"}}},
    ]  # fmt: skip
    moto_cast = DynamoType.cast_value.fget.moto  # type: ignore[attr-defined,union-attr]
    for value in values:
        typed = DynamoType(value)
        assert typed.cast_value == moto_cast(typed) and type(typed.cast_value) is type(moto_cast(typed)), value


def test_inside_an_index_query_an_item_is_copied_with_what_the_index_keeps_and_sized_once() -> None:
    import copy

    from moto.dynamodb.models.dynamo_type import DynamoType, Item

    from atf_local.index_copies import projecting

    fast_queries()
    stored = Item(DynamoType({"S": "t1"}), None, {"id": {"S": "t1"}, "gs": {"S": "p"}, "payload": {"S": "x" * 50}})
    moto_copy = Item.__deepcopy__.moto(stored, {})  # type: ignore[attr-defined]
    with projecting(["id", "gs", "nt"]):
        kept = copy.deepcopy(stored)
        first = stored.size()
        stored.attrs["more"] = DynamoType({"S": "y" * 20})
        assert stored.size() == first  # sized once inside
    assert set(kept.attrs) == {"id", "gs"} and kept.attrs["gs"] == stored.attrs["gs"]
    assert kept.attrs["gs"] is not stored.attrs["gs"] and kept.hash_key is not stored.hash_key
    assert first == Item.size.moto(Item(DynamoType({"S": "t1"}), None, {"id": {"S": "t1"}, "gs": {"S": "p"}}))
    assert stored.size() > first  # sized again outside, whole
    whole = copy.deepcopy(stored)
    assert set(whole.attrs) == set(moto_copy.attrs) | {"more"}


def test_an_index_page_holds_a_megabyte_of_index_entries_not_of_whole_items(ddb: Any, config: StackConfig) -> None:
    """DynamoDB sizes what a query of a global secondary index reads by its index entries (the attributes
    the index keeps): tasks whose payloads the index leaves out fit one page, where moto alone, sizing whole
    items, split them over three."""
    for n in range(8):
        item = {"id": {"S": f"t{n}"}, Attr.LAMBDA: {"S": "work"}, Attr.PAYLOAD: {"S": "x" * 300_000}}
        item |= {Attr.INDEX_PK: {"S": PARTITIONS[0]}, Attr.INDEX_SK: {"N": str(n)}}
        ddb.put_item(TableName=config.table_name, Item=item)
    request = {"TableName": config.table_name, "IndexName": INDEX_NAME, "KeyConditionExpression": "gs = :p"}
    request["ExpressionAttributeValues"] = {":p": {"S": PARTITIONS[0]}}
    with moto_alone():
        whole = _pages(ddb, request)
    entries = _pages(ddb, request)
    assert [len(page["Items"]) for page in entries] == [8] and "LastEvaluatedKey" not in entries[0]
    assert [len(page["Items"]) for page in whole] == [3, 3, 2]
    assert [i for page in whole for i in page["Items"]] == entries[0]["Items"]


def test_a_copy_inside_an_index_query_holds_the_values_moto_copies() -> None:
    import copy

    from moto.dynamodb.models.dynamo_type import DynamoType, Item

    from atf_local.index_copies import projecting

    fast_queries()
    values = {
        "id": {"S": "t1"}, "n": {"N": "1.50"}, "b": {"B": b"\x00"}, "t": {"BOOL": False}, "z": {"NULL": True},
        "ss": {"SS": ["a", "b"]}, "l": {"L": [{"S": "x"}]}, "m": {"M": {"k": {"N": "7"}}},
    }  # fmt: skip
    stored = Item(DynamoType({"S": "t1"}), None, values)
    with projecting(list(values)):
        kept = copy.deepcopy(stored)
    assert kept.attrs == stored.attrs and kept.attrs.keys() == stored.attrs.keys()
    for name, value in kept.attrs.items():
        assert type(value) is DynamoType and value is not stored.attrs[name], name
        assert value.to_json() == stored.attrs[name].to_json(), name
    assert kept.attrs["l"].value[0] is not stored.attrs["l"].value[0]  # what holds values is moto's deep copy


def test_an_attribute_added_while_an_item_is_copied_inside_an_index_query_fails_nothing() -> None:
    """moto's server runs calls on threads: an UpdateItem may add an attribute to an item an index Query is
    copying. Here the copy of one value adds it, deterministically (once seen in CI as a RuntimeError)."""
    import copy

    from moto.dynamodb.models.dynamo_type import DynamoType, Item

    from atf_local.index_copies import projecting

    fast_queries()
    stored = Item(DynamoType({"S": "t1"}), None, {"id": {"S": "t1"}, "gs": {"S": "p"}})

    class Writer(DynamoType):
        def __deepcopy__(self, memo: dict[int, Any]) -> DynamoType:
            stored.attrs["added"] = DynamoType({"S": "by another thread"})
            return DynamoType({"S": "p"})

    stored.attrs["gs"] = Writer({"S": "p"})
    with projecting(["id", "gs"]):
        kept = copy.deepcopy(stored)
    assert set(kept.attrs) == {"id", "gs"} and "added" in stored.attrs


def test_an_attribute_added_while_an_item_is_sized_inside_an_index_query_fails_nothing() -> None:
    """As above, for the size of a stored item (moto sums its attributes' sizes; seen in CI as well)."""
    from moto.dynamodb.models.dynamo_type import DynamoType, Item

    from atf_local.index_copies import projecting

    fast_queries()
    stored = Item(DynamoType({"S": "t1"}), None, {"id": {"S": "t1"}, "gs": {"S": "p"}})

    class Writer(DynamoType):
        def size(self) -> int:
            stored.attrs["added"] = DynamoType({"S": "by another thread"})
            return 1

    stored.attrs["gs"] = Writer({"S": "p"})
    with projecting(["id", "gs"]):
        sized = stored.size()
    assert sized == len("id") + len("t1") + len("gs") + 1 and "added" in stored.attrs


def test_a_filter_on_an_attribute_the_index_leaves_out_answers_as_moto_alone(ddb: Any, config: StackConfig) -> None:
    rng = random.Random(5)
    for _ in range(60):
        _write(ddb, rng, config, delete=False)
    for partition in PARTITIONS:
        request = {"TableName": config.table_name, "IndexName": INDEX_NAME, "KeyConditionExpression": "gs = :p"}
        request["FilterExpression"] = "attribute_exists(#payload) OR #l = :lam"
        request["ExpressionAttributeNames"] = {"#payload": Attr.PAYLOAD, "#l": Attr.LAMBDA}
        request["ExpressionAttributeValues"] = {":p": {"S": partition}, ":lam": {"S": "work"}}
        with moto_alone():
            expected = _pages(ddb, request)
        assert _pages(ddb, request) == expected
        assert any(page["Count"] for page in expected)
