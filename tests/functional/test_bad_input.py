"""Bad schedule requests get an error naming the field, and nothing is written."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from atf_core.chains import ChainSpec
from atf_core.config import StackConfig
from atf_core.errors import AtfError, InputError, PayloadTooLarge, WrongType, input_error
from atf_core.recurrence import ScheduleSpec
from atf_core.schema import MAX_PAYLOAD_BYTES, ScheduleRequest
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling

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


# A payload enters with a task, a schedule and a chain's link; each is one JSON object.
PAYLOAD_CARRIERS = [
    (ScheduleRequest, lambda p: {"lambda": "work", "payload": p}, "payload"),
    (ScheduleSpec, lambda p: {"lambda": "work", "every_seconds": 60, "payload": p}, "payload"),
    (ChainSpec, lambda p: {"links": [{"name": "a", "lambda": "work", "payload": p}]}, "links[0].payload"),
]
NOT_JSON_OBJECTS = [[], "", 0, [1], "x", False, None, {"at": datetime(2030, 1, 1)}, {"n": math.nan}, {"s": {1}}]


@pytest.mark.parametrize("payload", NOT_JSON_OBJECTS, ids=repr)
@pytest.mark.parametrize(("model", "body", "field"), PAYLOAD_CARRIERS, ids=[m.__name__ for m, _, _ in PAYLOAD_CARRIERS])
def test_a_payload_that_is_not_a_json_object_is_a_wrong_type_naming_it(
    model: type[BaseModel], body: Callable[[Any], dict[str, Any]], field: str, payload: Any
) -> None:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(body(payload))
    error = input_error(caught.value)
    assert (type(error), error.code, error.field) == (WrongType, "wrong_type", field)
    assert error.message.startswith(f"{field}: must be ") and "JSON" in error.message


@pytest.mark.parametrize(("model", "body", "field"), PAYLOAD_CARRIERS, ids=[m.__name__ for m, _, _ in PAYLOAD_CARRIERS])
def test_an_oversized_payload_is_payload_too_large_naming_it(
    model: type[BaseModel], body: Callable[[Any], dict[str, Any]], field: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(body({"blob": "x" * MAX_PAYLOAD_BYTES}))
    error = input_error(caught.value)
    assert (type(error), error.code, error.field) == (PayloadTooLarge, "payload_too_large", field)


@pytest.mark.parametrize(("body", "field"), PARSE_ERRORS, ids=[f for _, f in PARSE_ERRORS])
def test_the_core_names_the_field_as_the_api_does(body: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        ScheduleRequest.model_validate(body)
    error = input_error(caught.value, within="tasks[7]")
    assert isinstance(error, InputError) and error.field == f"tasks[7].{field}"
    assert error.message.startswith(f"tasks[7].{field}")
