"""atf_local.fast_dynamodb changes no answer: every DynamoDB call below is answered both ways, written
directly and walked through botocore's shapes as moto does, and the two must be the same (status,
headers, the JSON document)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from moto.dynamodb import responses
from moto.dynamodb.comparisons import ConditionExpressionParser
from moto.dynamodb.parsing import ast_nodes, expressions

from atf_local.fast_dynamodb import ITEM_ACTIONS, _as_json, _output_shape, fast_dynamodb
from tests.conftest import moto_session

PARSER: Any = expressions.UpdateExpressionParser  # type: ignore[attr-defined]
TABLE = "things"
EVERY_TYPE = {
    "h": {"S": "a"},
    "r": {"N": "1"},
    "g": {"S": "g1"},
    "s": {"S": "text"},
    "empty": {"S": ""},
    "n": {"N": "-12.50"},
    "yes": {"BOOL": True},
    "nothing": {"NULL": True},
    "list": {"L": [{"S": "x"}, {"N": "2"}, {"M": {"deep": {"SS": ["p", "q"]}}}]},
    "map": {"M": {"k": {"NS": ["1", "2.5"]}, "e": {"M": {}}, "l": {"L": []}}},
}
BINARY = {"h": {"S": "bin"}, "r": {"N": "2"}, "blob": {"B": b"\x00\xffdata"}, "blobs": {"BS": [b"a", b"b"]}}
NULL_TEXT = {"h": {"S": "a"}, "r": {"N": "3"}, "g": {"S": "g1"}, "s": {"S": "says null"}}


@pytest.fixture
def moto_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto as it is, whatever an earlier test installed; and so again after the test."""
    monkeypatch.setattr(responses, "_atf_fast", False, raising=False)
    monkeypatch.setattr(responses.DynamoHandler, "serialized", responses.DynamoHandler.serialized)
    monkeypatch.setattr(PARSER, "make", classmethod(_moto_parse()))
    monkeypatch.setattr(ConditionExpressionParser, "_lex_condition_expression", _moto_lexer())
    monkeypatch.delattr(ast_nodes.Node, "__deepcopy__", raising=False)
    types = ast_nodes.DepthFirstTraverser.nodes_to_be_processed
    monkeypatch.setattr(ast_nodes.DepthFirstTraverser, "nodes_to_be_processed", getattr(types, "moto", types))
    monkeypatch.delenv("ATF_AWS_ENDPOINT", raising=False)


def _moto_parse() -> Any:
    """moto's own parse, under the cache an earlier test may have put on it."""
    parse = PARSER.make.__func__
    return getattr(parse, "__wrapped__", parse)


def _moto_lexer() -> Any:
    lexer = ConditionExpressionParser._lex_condition_expression
    return getattr(lexer, "moto", lexer)


@pytest.fixture
def answers(moto_alone: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """Each answer as written by the patch and by moto's walk, for the length of the test."""
    walk = responses.DynamoHandler.serialized
    fast_dynamodb()
    direct = responses.DynamoHandler.serialized
    seen: list[dict[str, Any]] = []

    def both(self: Any, action_result: Any) -> Any:
        written = direct(self, action_result)
        walked = walk(self, action_result)
        action = self._get_action()
        direct_json = action in ITEM_ACTIONS and _as_json(action_result.result, _output_shape(action)) is not None
        # copied as they are now: moto adds its request id to the headers of the answer it sends on
        walked_now = (walked[0], dict(walked[1]), walked[2])
        seen.append({"action": action, "direct": direct_json, "written": written, "walked": walked_now})
        return walked

    monkeypatch.setattr(responses.DynamoHandler, "serialized", both)
    yield seen


@pytest.fixture
def ddb(answers: list[dict[str, Any]]) -> Iterator[Any]:
    from moto import mock_aws

    with mock_aws():
        client = moto_session().client("dynamodb")
        client.create_table(**_table())
        yield client


def _table() -> dict[str, Any]:
    return {
        "TableName": TABLE,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [
            {"AttributeName": name, "AttributeType": kind} for name, kind in (("h", "S"), ("r", "N"), ("g", "S"))
        ],
        "KeySchema": [{"AttributeName": "h", "KeyType": "HASH"}, {"AttributeName": "r", "KeyType": "RANGE"}],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": "by-g",
                "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}, {"AttributeName": "r", "KeyType": "RANGE"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
    }


def _key(h: str, r: int) -> dict[str, Any]:
    return {"h": {"S": h}, "r": {"N": str(r)}}


def _calls(ddb: Any) -> None:
    """Every item call, with each kind of answer: items of every type, none, consumed capacity, pages."""
    for capacity in ("NONE", "TOTAL", "INDEXES"):
        ddb.put_item(TableName=TABLE, Item=EVERY_TYPE, ReturnValues="ALL_OLD", ReturnConsumedCapacity=capacity)
    ddb.put_item(TableName=TABLE, Item=BINARY)
    ddb.put_item(TableName=TABLE, Item=NULL_TEXT)
    for r in range(4, 9):
        ddb.put_item(TableName=TABLE, Item={**_key("b", r), "g": {"S": "g1"}, "v": {"N": str(r)}})
    ddb.get_item(TableName=TABLE, Key=_key("a", 1), ReturnConsumedCapacity="TOTAL")
    ddb.get_item(
        TableName=TABLE, Key=_key("a", 1), ProjectionExpression="#m.k, yes", ExpressionAttributeNames={"#m": "map"}
    )
    ddb.get_item(TableName=TABLE, Key=_key("missing", 1))
    ddb.get_item(TableName=TABLE, Key=_key("bin", 2))
    for returns in ("NONE", "ALL_NEW", "ALL_OLD", "UPDATED_NEW", "UPDATED_OLD"):
        ddb.update_item(
            TableName=TABLE,
            Key=_key("b", 4),
            UpdateExpression="SET v = v + :one, tags = list_append(if_not_exists(tags, :none), :tag) REMOVE gone",
            ConditionExpression="attribute_exists(h)",
            ExpressionAttributeValues={":one": {"N": "1"}, ":none": {"L": []}, ":tag": {"L": [{"S": returns}]}},
            ReturnValues=returns,
            ReturnConsumedCapacity="TOTAL",
        )
    with pytest.raises(ClientError):
        ddb.update_item(
            TableName=TABLE,
            Key=_key("b", 5),
            UpdateExpression="SET v = :v",
            ConditionExpression="v = :other",
            ExpressionAttributeValues={":v": {"N": "0"}, ":other": {"N": "99"}},
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    _reads(ddb)
    ddb.delete_item(TableName=TABLE, Key=_key("b", 8), ReturnValues="ALL_OLD")
    ddb.delete_item(TableName=TABLE, Key=_key("b", 99))
    _transactions(ddb)


def _reads(ddb: Any) -> None:
    by_h = {"KeyConditionExpression": "h = :h", "ExpressionAttributeValues": {":h": {"S": "b"}}}
    ddb.query(TableName=TABLE, Limit=2, ReturnConsumedCapacity="TOTAL", **by_h)
    ddb.query(TableName=TABLE, Select="COUNT", **by_h)
    ddb.query(TableName=TABLE, ScanIndexForward=False, FilterExpression="v > :three", **_with(by_h, ":three", "3"))
    by_g = {"KeyConditionExpression": "g = :g", "ExpressionAttributeValues": {":g": {"S": "g1"}}}
    ddb.query(TableName=TABLE, IndexName="by-g", Limit=3, **by_g)
    ddb.query(TableName=TABLE, IndexName="by-g", ProjectionExpression="h, r, s", **by_g)
    ddb.scan(TableName=TABLE, Limit=4)
    ddb.scan(TableName=TABLE)
    ddb.scan(TableName=TABLE, FilterExpression="h = :h", ExpressionAttributeValues={":h": {"S": "b"}})
    keys = [_key("a", 1), _key("b", 5), _key("missing", 3), _key("bin", 2)]
    ddb.batch_get_item(RequestItems={TABLE: {"Keys": keys}}, ReturnConsumedCapacity="TOTAL")
    ddb.batch_get_item(RequestItems={TABLE: {"Keys": keys[:2], "ProjectionExpression": "h, r, yes"}})
    writes = [{"PutRequest": {"Item": {**_key("c", r), "g": {"S": "g2"}}}} for r in range(3)]
    ddb.batch_write_item(RequestItems={TABLE: writes}, ReturnConsumedCapacity="TOTAL")


def _with(request: dict[str, Any], name: str, number: str) -> dict[str, Any]:
    values = {**request["ExpressionAttributeValues"], name: {"N": number}}
    return {**request, "ExpressionAttributeValues": values}


def _transactions(ddb: Any) -> None:
    ddb.transact_get_items(
        TransactItems=[{"Get": {"TableName": TABLE, "Key": k}} for k in (_key("a", 1), _key("c", 0))]
    )
    put = {"Put": {"TableName": TABLE, "Item": {**_key("d", 1), "g": {"S": "g3"}}}}
    check = {"ConditionCheck": {"TableName": TABLE, "Key": _key("a", 1), "ConditionExpression": "attribute_exists(h)"}}
    ddb.transact_write_items(TransactItems=[put, check], ReturnConsumedCapacity="TOTAL")
    refused = {**check["ConditionCheck"], "ConditionExpression": "attribute_not_exists(h)"}
    with pytest.raises(ClientError):
        ddb.transact_write_items(TransactItems=[{"ConditionCheck": refused}, {"Put": {**put["Put"]}}])


def test_every_item_answer_is_written_as_moto_writes_it(ddb: Any, answers: list[dict[str, Any]]) -> None:
    _calls(ddb)
    for seen in answers:
        (status, headers, body), (walk_status, walk_headers, walk_body) = seen["written"], seen["walked"]
        assert (status, headers) == (walk_status, walk_headers), seen["action"]
        assert json.loads(body) == json.loads(walk_body), seen["action"]
    direct = {seen["action"] for seen in answers if seen["direct"]}
    walked = {seen["action"] for seen in answers if not seen["direct"]}
    # Then every item call was written directly, except where a binary attribute sent it the long way;
    # table calls took moto's walk
    assert direct == ITEM_ACTIONS
    assert {"CreateTable", "GetItem", "BatchGetItem", "Scan"} <= walked


@pytest.mark.usefixtures("moto_alone")
def test_expressions_parsed_once_update_as_ones_parsed_each_time() -> None:
    # Given moto as it is, then with each expression parsed once and its trees copied directly
    alone = _updates()
    fast_dynamodb()
    remembered = _updates()
    # Then the same updates answer alike, item for item, the refusals included, and the parses were reused
    assert remembered == alone
    assert PARSER.make.__func__.cache_info().hits >= 30
    assert ConditionExpressionParser._lex_condition_expression.tokens.cache_info().hits >= 30


UPDATES = [
    "SET v = v + :n, tags = list_append(if_not_exists(tags, :none), :tag) REMOVE gone",
    "SET #m.#k = :n, seen = if_not_exists(seen, :n) ADD hits :n",
    "SET v = :n REMOVE tags[0]",
    "SET v = v + :n REMOVE",  # refused: nothing after REMOVE, every time
]
CONDITIONS = [
    None,
    "attribute_exists(v) AND (v < :n OR attribute_not_exists(seen))",  # met, then refused as v grows
    "NOT (v BETWEEN :zero AND :n) AND attribute_not_exists(gone)",  # refused while gone is there
    "#m.#k <> :n OR v IN (:n, :zero)",
    "attribute_not_exists(h)",  # refused every time
]


def _updates() -> list[Any]:
    from moto import mock_aws

    seen: list[Any] = []
    with mock_aws():
        ddb = moto_session().client("dynamodb")
        ddb.create_table(**_table())
        for r in range(3):
            item = {**_key("u", r), "v": {"N": "0"}, "m": {"M": {}}, "gone": {"S": "x"}}
            ddb.put_item(TableName=TABLE, Item=item)
        for step in range(12):
            for number, text in enumerate(UPDATES):
                condition = CONDITIONS[(step + number) % len(CONDITIONS)]
                said = text + (condition or "")
                values = {":n": {"N": str(step)}, ":none": {"L": []}, ":tag": {"L": [{"S": f"s{step}"}]}}
                values = {k: v for k, v in {**values, ":zero": {"N": "0"}}.items() if k in said}
                names = {n: a for n, a in (("#m", "m"), ("#k", f"k{step % 3}")) if n in said}
                request = {"TableName": TABLE, "Key": _key("u", step % 3), "UpdateExpression": text}
                if condition is not None:
                    request["ConditionExpression"] = condition
                try:
                    answer = ddb.update_item(
                        **request,
                        ExpressionAttributeValues=values,
                        **({"ExpressionAttributeNames": names} if names else {}),
                        ReturnValues="ALL_NEW",
                    )
                    seen.append(answer["Attributes"])
                except ClientError as refused:
                    seen.append(refused.response["Error"])
        seen.append(sorted(ddb.scan(TableName=TABLE)["Items"], key=lambda item: item["r"]["N"]))
    return seen


@pytest.mark.usefixtures("moto_alone")
def test_condition_tokens_found_once_are_moto_s_with_lists_of_their_own() -> None:
    texts = [c for c in CONDITIONS if c is not None] + ["a.b[1] = :v AND #n.c <> :w", "(x >= :y)"]
    alone = [list(ConditionExpressionParser(text, {}, {})._lex_condition_expression()) for text in texts]
    fast_dynamodb()
    lexer = ConditionExpressionParser._lex_condition_expression
    for text, tokens in zip(texts, alone, strict=True):
        first = list(ConditionExpressionParser(text, {}, {})._lex_condition_expression())
        again = list(ConditionExpressionParser(text, {}, {})._lex_condition_expression())
        assert first == again == tokens, text
        assert all(a.children is not b.children for a, b in zip(first, again, strict=True))
    # A text that cannot be split fails every time, as moto's does, and is not remembered
    for _ in range(2):
        with pytest.raises(ValueError, match="Cannot parse condition starting at:!"):
            ConditionExpressionParser("a = :b !", {}, {})._lex_condition_expression()
    assert lexer.tokens.cache_info().currsize == len(texts)


@pytest.mark.usefixtures("moto_alone")
def test_a_parsed_expression_is_copied_directly_as_deepcopy_copies_it() -> None:
    trees = [PARSER.make(text) for text in UPDATES[:3]]
    parts = [tree.children[0] for tree in trees]  # its parent link reaches the rest: copied with it
    generic = [copy.deepcopy(node) for node in trees + parts]
    fast_dynamodb()
    direct = [copy.deepcopy(node) for node in trees + parts]
    originals = {id(item) for node in trees for item in _objects(node)}
    for made, expected, source in zip(direct, generic, trees + parts, strict=True):
        assert _graph(made) == _graph(expected) == _graph(source)
        assert not originals & {id(item) for item in _objects(made)}  # nothing shared with the source


def _objects(root: Any) -> list[Any]:
    """Every node and list reachable from root (children, parent links), in the order first reached."""
    seen: dict[int, Any] = {}
    stack = [root]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen[id(item)] = item
        if isinstance(item, ast_nodes.Node):
            stack.extend(reversed(list(vars(item).values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))
    return [item for item in seen.values() if isinstance(item, ast_nodes.Node | list)]


def _graph(root: Any) -> list[Any]:
    """root's object graph with each node and list named by where it was first reached: two graphs are
    equal when they have the same shape, links and values."""
    objects = _objects(root)
    place = {id(item): number for number, item in enumerate(objects)}

    def named(value: Any) -> Any:
        return ("ref", place[id(value)]) if id(value) in place else ("value", type(value).__name__, repr(value))

    return [
        (type(item).__name__, sorted((k, named(v)) for k, v in vars(item).items()))
        if isinstance(item, ast_nodes.Node)
        else ("list", [named(v) for v in item])
        for item in objects
    ]


@pytest.mark.usefixtures("moto_alone")
def test_each_validator_pass_works_on_the_node_types_moto_names_for_it() -> None:
    passes = _subclasses(ast_nodes.DepthFirstTraverser)
    bare = [kind.__new__(kind) for kind in passes]  # a pass's types need none of its state
    alone = [ast_nodes.DepthFirstTraverser.nodes_to_be_processed(each) for each in bare]
    fast_dynamodb()
    assert len(passes) >= 8
    for _ in range(2):
        assert [each.nodes_to_be_processed() for each in bare] == alone


def _subclasses(kind: type) -> list[type]:
    return [sub for direct in kind.__subclasses__() for sub in (direct, *_subclasses(direct))]
