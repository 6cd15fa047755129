"""Make moto's DynamoDB write its item answers as the JSON they already are, and parse expressions once.

Profiled in the throughput benchmark (py-spy, holding the GIL), moto's DynamoDB server spent ~30% of
its CPU writing answers: moto 5.2 walks every answer through botocore's output shape, value by value,
looking each member up under several spellings. The answers of the item calls (GetItem, PutItem,
UpdateItem, Query, the batches, the transactions) are already DynamoDB's JSON: maps of
AttributeValues, counts, consumed capacity, keys. Here such an answer is written by `json.dumps`, and
the shape walk is kept for everything else: errors, table calls, and any answer JSON cannot write as it
stands (binary attributes, which the walk encodes as base64). The walk's other work is kept: only the
members the output shape has, and only those that are set (moto's answers carry a few more, such as
DeleteItem's ConsumedCapacityUnits). The answers are the same (tests/functional/test_fast_dynamodb.py).

Profiled again in the start-lag benchmark, a conditional UpdateItem (a claim, a result) spent a third of its
time in work that does not depend on the call: splitting its ConditionExpression into tokens (twice a
call), and the generic deep copy of the parsed UpdateExpression the validator works on.
"""

from __future__ import annotations

import copy
import functools
import json
from collections import deque
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
    _lex_once()
    _copy_nodes_directly()
    _node_types_once()
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


def _lex_once() -> None:
    """moto splits a ConditionExpression into tokens on every parse (the handler's, then the backend's),
    trying its patterns at each position. The tokens depend on the expression's text alone (names and
    values are looked up in later passes), so they are found once per text; each parse still gets tokens
    of its own, with fresh child lists, as the later passes may change them. A text that cannot be split
    is not remembered and fails each time."""
    from moto.dynamodb.comparisons import ConditionExpressionParser

    parser: Any = ConditionExpressionParser
    split = parser._lex_condition_expression

    @functools.lru_cache(maxsize=1024)
    def tokens(expression: str) -> tuple[tuple[str, str, str, str], ...]:
        return tuple((t.nonterminal, t.kind, t.text, t.value) for t in split(parser(expression, None, None)))

    def lexed(self: Any) -> deque[Any]:
        return deque(self.Node(*token, children=[]) for token in tokens(self.condition_expression))

    lexed.tokens = tokens  # type: ignore[attr-defined]  # for the tests: the cache's counts,
    lexed.moto = split  # type: ignore[attr-defined]  # and moto's own
    parser._lex_condition_expression = lexed


def _copy_nodes_directly() -> None:
    """The update validator deep-copies the parsed expression it then rewrites. Python's generic deep copy
    of a tree node goes through __reduce_ex__ and a reconstruction, most of the copy's time. A node is a
    plain object (its type name, its children, its parent), so it is copied as the generic copy would,
    attribute for attribute through the same memo (shared nodes and parent links come out as they do
    there), without the round trip."""
    from moto.dynamodb.parsing import ast_nodes

    node: Any = ast_nodes.Node  # type: ignore[attr-defined]  # ast_nodes is untyped
    node.__deepcopy__ = _node_copy


def _node_types_once() -> None:
    """Each pass of the update validator asks, at every node of the tree, which node types it works on, and
    moto answers by building the pass's map of types to bound methods and taking its keys. The types are
    fixed by the pass's class (each map is a literal of classes), so each class's are taken once."""
    from moto.dynamodb.parsing import ast_nodes

    traverser: Any = ast_nodes.DepthFirstTraverser  # type: ignore[attr-defined]  # ast_nodes is untyped
    moto_types = traverser.nodes_to_be_processed
    found: dict[type, tuple[type, ...]] = {}

    def node_types(self: Any) -> tuple[type, ...]:
        kind = type(self)
        if kind not in found:
            found[kind] = moto_types(self)
        return found[kind]

    node_types.moto = moto_types  # type: ignore[attr-defined]  # for the tests
    traverser.nodes_to_be_processed = node_types


def _node_copy(self: Any, memo: dict[int, Any]) -> Any:
    kind: Any = type(self)
    clone = kind.__new__(kind)
    memo[id(self)] = clone
    clone.__dict__.update(copy.deepcopy(self.__dict__, memo))
    return clone


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
