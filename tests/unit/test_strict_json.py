"""NaN and the infinities are no JSON values (RFC 8259), though Python's reader takes them: a request carrying one
is malformed, and a number that is one is refused naming its field, not compared with its bounds."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from atf_core.errors import from_validation
from atf_core.schema import ScheduleRequest, decode_json
from functions.frontend.errors import _refuse_non_json_numbers


@pytest.mark.parametrize("word", ["NaN", "Infinity", "-Infinity"])
def test_a_body_holding_nan_or_an_infinity_is_not_json(word: str) -> None:
    body = f'{{"lambda": "work", "delay_seconds": {word}}}'
    with pytest.raises(ValueError, match=f"{word} is not a JSON value"):
        decode_json(body)
    with pytest.raises(ValueError, match="is not a JSON value"):
        _refuse_non_json_numbers(body)
    _refuse_non_json_numbers('{"payload": {"note": "NaN and Infinity in a string are text"}}')


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_a_number_that_is_nan_or_an_infinity_is_refused_naming_its_field(number: float) -> None:
    with pytest.raises(ValidationError) as caught:
        ScheduleRequest.model_validate({"lambda": "work", "delay_seconds": number})
    refused = from_validation(list(caught.value.errors()))
    assert (refused.field, str(refused)) == ("delay_seconds", "delay_seconds: Input should be a finite number")
