"""The tests' check of DynamoDB's expression rules that moto does not enforce (tests/aws_rules.py)."""

from __future__ import annotations

from tests.aws_rules import broken_rule


def in_list(n: int) -> str:
    return f"NOT #c IN ({', '.join(f':c{i}' for i in range(n))})"


def test_an_in_list_of_100_values_is_taken_and_one_of_101_refused() -> None:
    assert broken_rule({"FilterExpression": in_list(100)}) is None
    assert broken_rule({"FilterExpression": in_list(101)}) == "FilterExpression: an IN list has more than 100 values"


def test_an_expression_over_4_kb_is_refused() -> None:
    long = " AND ".join(f"#a{i} = :v{i}" for i in range(400))
    assert broken_rule({"ConditionExpression": long}) == "ConditionExpression is longer than 4 KB"
    assert broken_rule({"KeyConditionExpression": "#pk = :pk"}) is None
