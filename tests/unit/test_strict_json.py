"""NaN and the infinities are no JSON values (RFC 8259), though Python's reader takes them: a request carrying one
is malformed, and a number that is one is refused naming its field, not compared with its bounds."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from atf_core.errors import from_validation
from atf_core.schema import ScheduleRequest, decode_json
from atf_local.api_server import to_event
from functions.frontend.handler import app


class _Context:
    function_name, memory_limit_in_mb, aws_request_id = "frontend", 128, "request"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:frontend"


@pytest.mark.parametrize("word", ["NaN", "Infinity", "-Infinity"])
def test_a_body_holding_nan_or_an_infinity_is_not_json(word: str) -> None:
    body = f'{{"lambda": "work", "delay_seconds": {word}}}'
    with pytest.raises(ValueError, match=f"{word} is not a JSON value"):
        decode_json(body)
    # The frontend reads bodies so: malformed, before any route runs
    event = to_event("POST", "/v1/tasks", [("Content-Type", "application/json")], body.encode(), "127.0.0.1")
    answer = app.resolve(event, _Context())
    assert (answer["statusCode"], json.loads(answer["body"])["code"]) == (400, "malformed_json")
    assert decode_json('{"payload": {"note": "NaN and Infinity in a string are text"}}')


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_a_number_that_is_nan_or_an_infinity_is_refused_naming_its_field(number: float) -> None:
    with pytest.raises(ValidationError) as caught:
        ScheduleRequest.model_validate({"lambda": "work", "delay_seconds": number})
    refused = from_validation(list(caught.value.errors()))
    assert (refused.field, str(refused)) == ("delay_seconds", "delay_seconds: Input should be a finite number")
