"""Bad schedule requests get an error naming the field, and nothing is written."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from atf_core.config import StackConfig
from atf_core.errors import AtfError
from atf_core.scheduling import Scheduling
from atf_core.schema import MAX_PAYLOAD_BYTES, ScheduleRequest
from atf_core.store.dynamo import DynamoTaskStore

PARSE_ERRORS = [
    ({"lambda": "work", "payload": "not an object"}, "payload"),
    ({"lambda": "work", "payload": {"blob": "x" * (MAX_PAYLOAD_BYTES + 1)}}, "payload"),
    ({"lambda": "work", "run_at": "next tuesday"}, "run_at"),
    ({"lambda": "work", "run_at": "2030-01-01T00:00:00"}, "run_at"),  # no time zone
    ({"lambda": "work", "delay_seconds": -1}, "delay_seconds"),
    ({"lambda": "work", "surprise": 1}, "surprise"),
    ({"payload": {}}, "lambda"),
    ({"lambda": "work", "max_attempts": 0}, "max_attempts"),
]
CONFIG_ERRORS = [
    ({"lambda": "nope"}, "unknown_lambda", "lambda"),
    ({"lambda": "work", "priority": "urgent"}, "unknown_priority", "priority"),
    ({"lambda": "work", "delay_seconds": 400 * 86400}, None, "delay_seconds"),
]


def _items(aws: Any, config: StackConfig) -> int:
    return int(aws.dynamodb.scan(TableName=config.table_name, Select="COUNT")["Count"])


@pytest.mark.parametrize(("body", "field"), PARSE_ERRORS, ids=[f for _, f in PARSE_ERRORS])
def test_unparseable_requests_name_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        ScheduleRequest.model_validate(body)
    assert field in {str(part) for error in caught.value.errors() for part in error["loc"]}


def test_a_payload_that_is_not_json_is_refused() -> None:
    with pytest.raises(ValidationError) as caught:
        ScheduleRequest.model_validate_json('{"lambda": "work", "payload": {"a": NaN}')
    assert caught.value.errors()


@pytest.mark.parametrize(("body", "code", "field"), CONFIG_ERRORS, ids=[f for _, _, f in CONFIG_ERRORS])
def test_requests_the_stack_cannot_serve_are_refused_and_nothing_is_written(
    aws: Any, config: StackConfig, body: dict[str, Any], code: str | None, field: str
) -> None:
    scheduling = Scheduling(DynamoTaskStore(aws.dynamodb, config), config)
    try:
        request = ScheduleRequest.model_validate(body)
    except ValidationError as error:  # caught before the configuration is even consulted
        assert field in {str(p) for e in error.errors() for p in e["loc"]}
        assert _items(aws, config) == 0
        return
    with pytest.raises(AtfError) as caught:
        scheduling.schedule(request)
    assert caught.value.field == field
    if code:
        assert caught.value.code == code
    assert _items(aws, config) == 0
