"""What a callback hands the executor: a Retry's delay and a returned value, checked where the callback made them,
so a value the task cannot be kept or retried with fails the attempt with an error naming it."""

from __future__ import annotations

import json
import math
from datetime import timedelta
from typing import Any

import pytest

from atf_core.schema import MAX_JSON_DEPTH
from atf_sdk.worker.registry import Retry
from atf_sdk.worker.results import ResultNotJson, result_json


@pytest.mark.parametrize(
    ("after", "seconds"), [(None, None), (0, 0.0), (2.5, 2.5), (timedelta(minutes=2), 120.0), (86400 * 366, 31622400.0)]
)
def test_a_retry_after_a_number_of_seconds_or_a_timedelta_is_taken(after: Any, seconds: float | None) -> None:
    assert Retry("later", after=after).after == seconds


@pytest.mark.parametrize(
    ("after", "error"),
    [
        ("5", TypeError),
        (True, TypeError),
        ([1], TypeError),
        (-5, ValueError),
        (timedelta(seconds=-1), ValueError),
        (math.nan, ValueError),
        (math.inf, ValueError),
        (1e20, ValueError),
        (86400 * 366 + 1, ValueError),
    ],
)
def test_a_retry_after_the_task_cannot_be_retried_after_raises_naming_it(after: Any, error: type[Exception]) -> None:
    # The callback raises this instead of the Retry: the attempt fails with it (the executor then retries by the
    # backoff); it had escaped the executor's thread as the outcome was computed, and the thread died.
    with pytest.raises(error, match="Retry after"):
        Retry("later", after=after)


@pytest.mark.parametrize("value", [{1: "a"}, {"a": [{"b": {2.5: 1}}]}, {True: 1}, [{"ok": 1}, {None: 2}], ({3: "x"},)])
def test_a_result_with_a_key_json_would_turn_into_a_string_is_not_json(value: Any) -> None:
    with pytest.raises(ResultNotJson, match="keys must be strings"):
        result_json(value)


def test_a_result_with_string_keys_is_kept_as_returned() -> None:
    value = {"a": [{"b": {"c": 1}}, (1, 2)], "é": None}
    assert json.loads(result_json(value) or "") == {"a": [{"b": {"c": 1}}, [1, 2]], "é": None}


def test_a_result_nested_past_the_limit_is_not_json() -> None:
    """The API could not write such a task back: its every read would fail."""
    deep: Any = 1
    for _ in range(MAX_JSON_DEPTH + 1):
        deep = [deep]
    with pytest.raises(ResultNotJson, match=f"limit of {MAX_JSON_DEPTH} levels"):
        result_json(deep)
    assert result_json(deep[0]) == json.dumps(deep[0], separators=(",", ":"))
