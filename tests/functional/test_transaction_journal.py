"""TransactWriteItems rolled back by its items (atf_local.transaction_journal) behaves as moto's own, which
copies every table: the same answers, the same items after, the same index Query results, over random
transactions that succeed, fail a condition, name an item twice, or name what does not exist."""

from __future__ import annotations

import inspect
import random
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import DynamoDBBackend, dynamodb_backends

from atf_local.atomic import atomic_dynamodb
from atf_local.fast_query import fast_queries

TABLE = "journal"
INDEX = "by-state"
JOURNALED, REFERENCE = "us-east-1", "eu-west-1"
STATES = ("new", "done")
KEYS = [(pk, sk) for pk in "abc" for sk in "12"]
ROUNDS = 150


@pytest.fixture
def world() -> Iterator[dict[str, Any]]:
    with mock_aws():
        atomic_dynamodb()  # as a local stack installs it: the journal under the lock every DynamoDB call takes
        fast_queries()  # and index Queries from the filings the journal's rollback must keep right
        clients = {region: boto3.client("dynamodb", region_name=region) for region in (JOURNALED, REFERENCE)}
        for client in clients.values():
            client.create_table(
                TableName=TABLE,
                AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"} for n in ("pk", "sk", "state")],
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                GlobalSecondaryIndexes=[
                    {
                        "IndexName": INDEX,
                        "KeySchema": [{"AttributeName": "state", "KeyType": "HASH"}],
                        "Projection": {"ProjectionType": "ALL"},
                    }
                ],
                BillingMode="PAY_PER_REQUEST",
            )
        yield {"clients": clients, "backends": {r: dynamodb_backends[DEFAULT_ACCOUNT_ID][r] for r in clients}}


def payload(rng: random.Random) -> dict[str, Any]:
    """An attribute of any of DynamoDB's types: what the rollback writes back must be what was there."""
    return rng.choice(
        [
            {"M": {"x": {"N": str(rng.randint(0, 9))}, "y": {"L": [{"S": "z"}, {"BOOL": True}, {"NULL": True}]}}},
            {"L": [{"N": "1.5"}, {"M": {"k": {"S": "v"}}}]},
            {"SS": ["p", "q"]},
            {"NS": ["1", "2"]},
            {"BS": ["YQ==", "Yg=="]},
            {"B": "AAEC"},
            {"BOOL": False},
        ]
    )


def entry(rng: random.Random) -> dict[str, Any]:
    pk, sk = rng.choice(KEYS)
    key = {"pk": {"S": pk}, "sk": {"S": sk}}
    state = {":s": {"S": rng.choice(STATES)}}
    kind = rng.choice(["Put", "Put", "Update", "Update", "Delete", "ConditionCheck", "Refused"])
    if kind == "Put":
        item = {**key, "state": state[":s"], "n": {"N": "0"}, "payload": payload(rng)}
        put: dict[str, Any] = {"TableName": TABLE, "Item": item}
        if rng.random() < 0.5:
            put["ConditionExpression"] = "attribute_not_exists(pk)"
        return {"Put": put}
    if kind == "Update":
        limit = {":limit": {"N": str(rng.randint(0, 3))}, ":one": {"N": "1"}, ":zero": {"N": "0"}}
        return {
            "Update": {
                "TableName": TABLE,
                "Key": key,
                "UpdateExpression": "SET n = if_not_exists(n, :zero) + :one, #s = :s",
                "ConditionExpression": rng.choice(["attribute_exists(pk)", "n < :limit", "attribute_not_exists(n)"]),
                "ExpressionAttributeNames": {"#s": "state"},
                "ExpressionAttributeValues": {**state, **limit},
            }
        }
    condition = {"ConditionExpression": "#s = :s", "ExpressionAttributeNames": {"#s": "state"}}
    if kind == "Delete":
        return {"Delete": {"TableName": TABLE, "Key": key, **condition, "ExpressionAttributeValues": state}}
    if kind == "ConditionCheck":
        return {"ConditionCheck": {"TableName": TABLE, "Key": key, **condition, "ExpressionAttributeValues": state}}
    return rng.choice(
        [
            {"Delete": {"TableName": "no-such-table", "Key": key}},
            {"Delete": {"TableName": TABLE, "Key": {"pk": {"S": pk}}}},  # the range key missing
        ]
    )


def outcome(call: Any) -> str:
    try:
        call()
    except Exception as error:  # noqa: BLE001  (the answer, whatever it is, is what is compared)
        return f"{type(error).__name__}: {error}"
    return "ok"


def contents(client: Any) -> dict[str, Any]:
    items = client.scan(TableName=TABLE)["Items"]
    by_state = {
        state: client.query(
            TableName=TABLE,
            IndexName=INDEX,
            KeyConditionExpression="#s = :s",
            ExpressionAttributeNames={"#s": "state"},
            ExpressionAttributeValues={":s": {"S": state}},
        )["Items"]
        for state in STATES
    }
    ordered = lambda found: sorted(found, key=lambda i: (i["pk"]["S"], i["sk"]["S"]))  # noqa: E731
    return {"items": ordered(items), **{state: ordered(found) for state, found in by_state.items()}}


@pytest.mark.parametrize("seed", range(2))
def test_random_transactions_answer_and_leave_the_table_as_mosts_own_rollback_does(
    world: dict[str, Any], seed: int
) -> None:
    journaled, reference = world["backends"][JOURNALED], world["backends"][REFERENCE]
    mosts_own = inspect.unwrap(DynamoDBBackend.transact_write_items)
    table = journaled.tables[TABLE]
    rng = random.Random(seed)
    answers = []
    for _ in range(ROUNDS):
        entries = [entry(rng) for _ in range(rng.randint(1, 4))]
        answer = outcome(lambda: journaled.transact_write_items(entries))  # noqa: B023
        assert answer == outcome(lambda: mosts_own(reference, entries))  # noqa: B023
        assert contents(world["clients"][JOURNALED]) == contents(world["clients"][REFERENCE])
        answers.append(answer.split(":")[0])
    # Every kind of answer came up, and the table moto serves is still the one it made
    assert {"ok", "TransactionCanceledException", "MultipleTransactionsException"} <= set(answers)
    assert journaled.tables[TABLE] is table


def test_a_cancelled_transaction_through_the_api_leaves_every_item_as_it_was(world: dict[str, Any]) -> None:
    client = world["clients"][JOURNALED]
    for pk, sk in KEYS:
        client.put_item(TableName=TABLE, Item={"pk": {"S": pk}, "sk": {"S": sk}, "state": {"S": "new"}})
    before = contents(client)
    with pytest.raises(client.exceptions.TransactionCanceledException) as cancelled:
        client.transact_write_items(
            TransactItems=[
                {"Delete": {"TableName": TABLE, "Key": {"pk": {"S": "a"}, "sk": {"S": "1"}}}},
                {"Put": {"TableName": TABLE, "Item": {"pk": {"S": "z"}, "sk": {"S": "1"}, "state": {"S": "done"}}}},
                {
                    "Update": {
                        "TableName": TABLE,
                        "Key": {"pk": {"S": "b"}, "sk": {"S": "2"}},
                        "UpdateExpression": "SET #s = :d",
                        "ConditionExpression": "#s = :d",
                        "ExpressionAttributeNames": {"#s": "state"},
                        "ExpressionAttributeValues": {":d": {"S": "done"}},
                    }
                },
            ]
        )
    reasons = [reason["Code"] for reason in cancelled.value.response["CancellationReasons"]]
    assert reasons == ["None", "None", "ConditionalCheckFailed"]
    assert contents(client) == before
