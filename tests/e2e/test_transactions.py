"""Scheduling inside a team's own DynamoDB transaction (atf_sdk.transaction), on the local stack with IAM
enforced: the team's service runs under a role of its own holding what docs/transactions.md says it needs
(the SDK's REQUIRED_ACTIONS on the task table, and its own table's actions), and a worker host runs the task."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from atf_core.aws import make_clients
from atf_core.schema import TaskStatus
from atf_core.store.scan import TaskScan
from atf_local.iam.accounts import add_role, credentials, session_of
from atf_local.iam.roles import ACCOUNT, REGION, translate
from atf_sdk.transaction import REQUIRED_ACTIONS, TaskEntries, task_entries
from tests.e2e.conftest import RunningStack

ORDERS = "team-orders"
TEAM_ROLE = "team-service"


def _arn(table: str) -> str:
    return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table}"


@pytest.fixture(scope="module")
def team_db(stack: RunningStack) -> Any:
    """The team's DynamoDB client, under its own role, and its own table of orders."""
    operator = stack.clients.dynamodb
    operator.create_table(
        TableName=ORDERS,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "order", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "order", "KeyType": "HASH"}],
    )
    tables = {_arn(stack.config.table_name), _arn(ORDERS)}
    granted = [
        {"Effect": "Allow", "Action": list(REQUIRED_ACTIONS), "Resource": [_arn(stack.config.table_name)]},
        {"Effect": "Allow", "Action": ["dynamodb:PutItem", "dynamodb:ConditionCheckItem"], "Resource": [_arn(ORDERS)]},
    ]
    add_role(stack.endpoint, TEAM_ROLE, [s for statement in granted for s in translate(statement, tables)])
    return make_clients(stack.endpoint, session=session_of(credentials(stack.endpoint, TEAM_ROLE))).dynamodb


def _order(order_id: str) -> dict[str, Any]:
    """The team's own write: a new order, only if there is none with its id."""
    item = {"order": {"S": order_id}, "state": {"S": "placed"}}
    return {"Put": {"TableName": ORDERS, "Item": item, "ConditionExpression": "attribute_not_exists(#o)",
                    "ExpressionAttributeNames": {"#o": "order"}}}  # fmt: skip


def _tasks_with_key(stack: RunningStack, key: str) -> list[str]:
    return [s.task.id for s in TaskScan(stack.clients.dynamodb, stack.config.table_name).tasks() if s.task.key == key]


def _raw_item(stack: RunningStack, task_id: str) -> dict[str, Any] | None:
    found = stack.clients.dynamodb.get_item(TableName=stack.config.table_name, Key={"id": {"S": task_id}})
    return found.get("Item")


def _send(team_db: Any, items: list[dict[str, Any]]) -> ClientError | None:
    try:
        team_db.transact_write_items(TransactItems=items)
    except ClientError as error:
        return error
    return None


def test_a_transaction_whose_own_condition_fails_leaves_no_task(stack: RunningStack, team_db: Any) -> None:
    key = f"order-{uuid.uuid4().hex[:8]}"
    scheduled = task_entries(stack.config, {"lambda": "work", "payload": {"order": key}, "key": key})
    # The team's own check fails: the order it expects to exist does not
    missing = {
        "ConditionCheck": {
            "TableName": ORDERS,
            "Key": {"order": {"S": "no-such-order"}},
            "ConditionExpression": "attribute_exists(#o)",
            "ExpressionAttributeNames": {"#o": "order"},
        }
    }
    items = [missing, _order(key), *scheduled.entries]
    refused = _send(team_db, items)
    assert refused is not None and refused.response["Error"]["Code"] == "TransactionCanceledException"
    assert scheduled.existing(refused, items) is None  # the caller's own condition, not the task's key
    # No task, no record of its idempotency key (the task's item is that record), no order
    assert _raw_item(stack, scheduled.task.id) is None
    assert _tasks_with_key(stack, key) == []
    assert "Item" not in stack.clients.dynamodb.get_item(TableName=ORDERS, Key={"order": {"S": key}})


def test_a_committed_transaction_creates_one_task_which_runs(
    stack: RunningStack, team_db: Any, worker_host: Callable[..., Any]
) -> None:
    worker_host()
    key = f"order-{uuid.uuid4().hex[:8]}"
    scheduled = task_entries(stack.config, {"lambda": "work", "payload": {"order": key}, "key": key})
    assert _send(team_db, [_order(key), *scheduled.entries]) is None
    assert _tasks_with_key(stack, key) == [scheduled.task.id]
    (done,) = stack.wait_for([scheduled.task.id], lambda t: t.status.terminal, timeout_s=40)
    assert (done.status, done.attempt, done.payload) == (TaskStatus.SUCCESS, 1, {"order": key})
    assert (
        stack.clients.dynamodb.get_item(TableName=ORDERS, Key={"order": {"S": key}})["Item"]["state"]["S"] == "placed"
    )


def test_the_same_key_again_cancels_the_transaction_and_names_the_task_that_holds_it(
    stack: RunningStack, team_db: Any
) -> None:
    key = f"order-{uuid.uuid4().hex[:8]}"
    request = {"lambda": "work", "payload": {"order": key}, "key": key, "delay_seconds": 3600}
    first = task_entries(stack.config, request)
    assert _send(team_db, [_order(key), *first.entries]) is None
    # The same request with the same key (naming the lambda's default priority the first left out), beside
    # another order of the team's: the whole transaction is refused
    default = stack.config.lambdas["work"].default_priority
    again: TaskEntries = task_entries(stack.config, {**request, "priority": default})
    items = [_order(f"{key}-again"), *again.entries]
    refused = _send(team_db, items)
    assert refused is not None
    existing = again.existing(refused, items)
    assert existing is not None and (existing.created, existing.conflict) == (False, False)
    assert existing.task.id == first.task.id and existing.task.status is TaskStatus.NEW
    # ...and a different request with that key is told apart: a conflict
    other = task_entries(stack.config, {**request, "payload": {"order": "another"}})
    refused_other = _send(team_db, other.entries)
    assert refused_other is not None
    conflict = other.existing(refused_other, other.entries)
    assert conflict is not None and conflict.conflict
    # Still exactly one task; the refused transactions' own writes were not applied
    assert _tasks_with_key(stack, key) == [first.task.id]
    assert "Item" not in stack.clients.dynamodb.get_item(TableName=ORDERS, Key={"order": {"S": f"{key}-again"}})


def test_a_role_without_the_grant_on_the_task_table_is_refused(stack: RunningStack) -> None:
    """IAM is enforced on the transaction (moto checks TransactWriteItems where AWS checks each entry's
    PutItem: docs/deploy.md): a role granted only its own table cannot schedule, and nothing is written."""
    own_only = {"Effect": "Allow", "Action": ["dynamodb:PutItem"], "Resource": [_arn(ORDERS)]}
    add_role(stack.endpoint, "team-without-grant", translate(own_only, {_arn(stack.config.table_name)}))
    ungranted = make_clients(stack.endpoint, session=session_of(credentials(stack.endpoint, "team-without-grant")))
    scheduled = task_entries(stack.config, {"lambda": "work"})
    refused = _send(ungranted.dynamodb, scheduled.entries)
    assert refused is not None and refused.response["Error"]["Code"] == "AccessDeniedException"
    assert "dynamodb:TransactWriteItems" in refused.response["Error"]["Message"]
    assert _raw_item(stack, scheduled.task.id) is None
