"""Make moto's DynamoDB write its item answers as the JSON they already are, and parse an update once.

Profiled in the throughput benchmark (py-spy, holding the GIL), moto's DynamoDB server spent ~30% of
its CPU writing answers: moto 5.2 walks every answer through botocore's output shape, value by value,
looking each member up under several spellings. The answers of the item calls (GetItem, PutItem,
UpdateItem, Query, the batches, the transactions) are already DynamoDB's JSON: maps of
AttributeValues, counts, consumed capacity, keys. Here such an answer is written by `json.dumps`, and
the shape walk is kept for everything else: errors, table calls, and any answer JSON cannot write as it
stands (binary attributes, which the walk encodes as base64). The walk's other work is kept: only the
members the output shape has, and only those that are set (moto's answers carry a few more, such as
DeleteItem's ConsumedCapacityUnits). The answers are the same (tests/functional/test_fast_dynamodb.py).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

ITEM_ACTIONS = frozenset(
    {
        "GetItem",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "Query",
        "Scan",
        "BatchGetItem",
        "BatchWriteItem",
        "TransactGetItems",
        "TransactWriteItems",
    }
)
CONTENT_TYPE = "application/x-amz-json-1.0"  # DynamoDB's JSON protocol, the shape walk's header too


def fast_dynamodb() -> None:
    """Install the direct answers on moto's DynamoDB in this process (idempotent)."""
    from moto.dynamodb import responses

    if getattr(responses, "_atf_fast", False):
        return
    handler = responses.DynamoHandler
    handler.serialized = _plain_json(handler.serialized)  # type: ignore[method-assign]
    _parse_once()
    responses._atf_fast = True  # type: ignore[attr-defined]


def _parse_once() -> None:
    """moto parses an UpdateItem's UpdateExpression twice per call (the handler, then the backend), about a
    seventh of its time, and the framework sends a handful of distinct expressions. The tree the parser
    returns is only read (the validator works on its own deep copy), so one tree per expression serves
    every call; an expression that fails to parse is not remembered and fails each time."""
    from moto.dynamodb.parsing import expressions

    parser: Any = expressions.UpdateExpressionParser  # type: ignore[attr-defined]
    parse: Callable[[Any, str], Any] = functools.lru_cache(maxsize=1024)(parser.make.__func__)
    parser.make = classmethod(parse)


def _plain_json(serialized: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(serialized)
    def answer(self: Any, action_result: Any) -> Any:
        action = self._get_action()
        body = _as_json(action_result.result, _output_shape(action)) if action in ITEM_ACTIONS else None
        if body is None:
            return serialized(self, action_result)
        headers = {"Content-Type": CONTENT_TYPE}
        headers.update(self.response_headers)
        return 200, headers, body

    return answer


@functools.cache
def _output_shape(action: str) -> Any:
    from moto.core.utils import get_service_model

    return get_service_model("dynamodb").operation_model(action).output_shape


def _as_json(result: object, shape: Any) -> str | None:
    """The answer as JSON, or None where the shape walk would write something else."""
    if type(result) is not dict:  # an error, or an answer moto builds another way
        return None
    try:
        return json.dumps(_members(result, shape))
    except (TypeError, ValueError):  # bytes: binary attributes are base64 in the answer
        return None


def _members(value: Any, shape: Any) -> Any:
    """What the walk keeps: the shape's members that are set (moto's answers carry a few more), down to the
    AttributeValues, which go as they are."""
    if shape.name == "AttributeValue":
        return value
    match shape.type_name:
        case "structure":
            return {
                name: _members(value[name], member)
                for name, member in shape.members.items()
                if value.get(name) is not None
            }
        case "map":
            if shape.value.name == "AttributeValue":
                return value
            return {key: _members(item, shape.value) for key, item in value.items()}
        case "list":
            return [_members(item, shape.member) for item in value]
    return value
