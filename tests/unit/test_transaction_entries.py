"""atf_sdk.transaction builds the entry the frontend's own create sends, and refuses bad input, naming the
field, before it builds anything (the stack-side behaviour is in tests/e2e/test_transactions.py)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from atf_core.config import StackConfig
from atf_core.errors import InputError, UnknownField, UnknownLambda, UnknownPriority, WrongType
from atf_core.schema import ScheduleRequest
from atf_core.store.tasks import DynamoTaskStore
from atf_sdk.transaction import REQUIRED_ACTIONS, task_entries
from tests.functional.helpers import T0


class _Recorder:
    """A DynamoDB client that records the PutItem it is sent."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def put_item(self, **request: Any) -> dict[str, Any]:
        self.sent.append(request)
        return {}


@pytest.mark.parametrize(
    "request_",
    [
        {"lambda": "work", "payload": {"n": 1}, "key": "order-1", "priority": "low", "delay_seconds": 30},
        {"lambda": "sleepy", "collection": "nightly", "expire_at": "2031-01-01T00:00:00Z", "timeout_seconds": 9},
    ],
)
def test_the_entry_is_the_put_the_frontend_sends(config: StackConfig, request_: dict[str, Any]) -> None:
    scheduled = task_entries(config, request_, now=T0)
    recorder = _Recorder()
    DynamoTaskStore(recorder, config).create(scheduled.task, ScheduleRequest.model_validate(request_).fingerprint())  # type: ignore[arg-type]
    assert scheduled.entries == [{"Put": recorder.sent[0]}]
    assert scheduled.entries[0]["Put"]["TableName"] == config.table_name
    assert REQUIRED_ACTIONS == ("dynamodb:PutItem",)


def test_the_lambdas_defaults_and_the_index_entry_come_from_the_configuration(config: StackConfig) -> None:
    scheduled = task_entries(config, ScheduleRequest.model_validate({"lambda": "work", "key": "k"}), now=T0)
    assert (scheduled.task.priority, scheduled.task.max_attempts) == ("normal", 3)
    item = scheduled.entries[0]["Put"]["Item"]
    assert item["gs"]["S"].startswith("n#work#normal#") and item["nt"]["N"] == item["sa"]["N"]


@pytest.mark.parametrize(
    ("request_", "error", "field"),
    [
        ({"lambda": "nope"}, UnknownLambda, "lambda"),
        ({"lambda": "work", "priority": "urgent"}, UnknownPriority, "priority"),
        ({"lambda": "work", "payload": [1, 2]}, WrongType, "payload"),
        ({"lambda": "work", "colour": "red"}, UnknownField, "colour"),
        ({"lambda": "work", "max_attempts": 0}, InputError, "max_attempts"),
        ({"lambda": "work", "delay_seconds": 5, "run_at": "2030-01-01T00:00:00Z"}, InputError, "delay_seconds"),
        ({"lambda": "work", "expire_at": "2020-01-01T00:00:00Z"}, InputError, "expire_at"),
        ({"payload": {}}, InputError, "lambda"),
    ],
)
def test_bad_input_names_the_field_and_builds_nothing(
    config: StackConfig, request_: dict[str, Any], error: type[InputError], field: str | None
) -> None:
    with pytest.raises(error) as refused:
        task_entries(config, request_, now=T0)
    assert refused.value.field == field


def test_a_failure_other_than_the_keys_is_not_taken_for_it(config: StackConfig) -> None:
    scheduled = task_entries(config, {"lambda": "work", "key": "k"}, now=T0)
    items = [{"ConditionCheck": {}}, *scheduled.entries]
    own = {"Error": {"Code": "TransactionCanceledException"}, "CancellationReasons": [
        {"Code": "ConditionalCheckFailed"}, {"Code": "None"}]}  # fmt: skip
    assert scheduled.existing(ClientError(own, "TransactWriteItems"), items) is None  # type: ignore[arg-type]
    throttled = {"Error": {"Code": "ProvisionedThroughputExceededException"}}
    assert scheduled.existing(ClientError(throttled, "TransactWriteItems"), items) is None  # type: ignore[arg-type]
