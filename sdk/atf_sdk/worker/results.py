"""A callback's return value, kept with its task: JSON of at most MAX_RESULT_BYTES.

A value that is not JSON, or too large, fails the attempt (a retriable failure, as any exception in the
callback would be), with the reason in the task's errors: a result is never cut short or dropped silently.
"""

from __future__ import annotations

import json
from typing import Any

from atf_core.schema import MAX_RESULT_BYTES


class ResultNotJson(Exception):
    """The callback returned something JSON cannot carry."""


class ResultTooLarge(Exception):
    """The callback returned more than MAX_RESULT_BYTES of JSON."""


def result_json(value: Any) -> str | None:
    """The value as compact JSON to store (None: the callback returned nothing)."""
    if value is None:
        return None
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise ResultNotJson(f"the callback's result is not JSON: {error}") from None
    size = len(text.encode())
    if size > MAX_RESULT_BYTES:
        raise ResultTooLarge(f"the callback's result is {size} bytes as JSON, over the limit of {MAX_RESULT_BYTES}")
    return text
