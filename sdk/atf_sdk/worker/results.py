"""A callback's return value, kept with its task: JSON of at most MAX_RESULT_BYTES.

A value that is not JSON, or too large, fails the attempt (a retriable failure, as any exception in the
callback would be), with the reason in the task's errors: a result is never cut short or dropped silently.
"""

from __future__ import annotations

import json
from typing import Any

from atf_core.schema import MAX_JSON_DEPTH, MAX_RESULT_BYTES, nested_too_deep


class ResultNotJson(Exception):
    """The callback returned something JSON cannot carry."""


class ResultTooLarge(Exception):
    """The callback returned more than MAX_RESULT_BYTES of JSON."""


def result_json(value: Any) -> str | None:
    """The value as compact JSON to store (None: the callback returned nothing)."""
    if value is None:
        return None
    if nested_too_deep(value):  # before _check_keys, which recurses
        raise ResultNotJson(f"the callback's result nests objects and arrays over the limit of {MAX_JSON_DEPTH} levels")
    try:
        _check_keys(value)
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise ResultNotJson(f"the callback's result is not JSON: {error}") from None
    size = len(text.encode())
    if size > MAX_RESULT_BYTES:
        raise ResultTooLarge(f"the callback's result is {size} bytes as JSON, over the limit of {MAX_RESULT_BYTES}")
    return text


def _check_keys(value: Any) -> None:
    """Raise TypeError at a mapping key that is not a string: json.dumps would turn 1, 1.5 or True into "1",
    "1.5" or "true", and the result read back would not be the one returned."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"keys must be strings, not {type(key).__name__} {key!r}")
            _check_keys(item)
    elif isinstance(value, list | tuple):
        for item in value:
            _check_keys(item)
