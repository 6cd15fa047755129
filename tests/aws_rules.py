"""DynamoDB's expression rules that moto does not enforce, enforced on the tests' in-process clients: an IN
list holds at most 100 values, an expression string at most 4 KB. A call breaking them is refused as
DynamoDB refuses it (ValidationException), so a test reaches the failure AWS would give.
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html, "Expression parameters")
"""

from __future__ import annotations

import re
from typing import Any

from botocore.exceptions import ClientError

MAX_IN_VALUES = 100
MAX_EXPRESSION_BYTES = 4 * 1024
EXPRESSIONS = ("KeyConditionExpression", "FilterExpression", "ConditionExpression", "UpdateExpression")
IN_LIST = re.compile(r"\bIN\s*\(([^)]*)\)", re.IGNORECASE)


def broken_rule(params: dict[str, Any]) -> str | None:
    """What a call's expressions break of DynamoDB's rules, or None."""
    for name in EXPRESSIONS:
        text = params.get(name)
        if not isinstance(text, str):
            continue
        if len(text.encode()) > MAX_EXPRESSION_BYTES:
            return f"{name} is longer than 4 KB"
        for values in IN_LIST.findall(text):
            if values.count(",") + 1 > MAX_IN_VALUES:
                return f"{name}: an IN list has more than {MAX_IN_VALUES} values"
    return None


def refuse_what_dynamodb_refuses(client: Any) -> None:
    """Register the check on a DynamoDB client (its calls and each call's items of a transaction)."""

    def check(params: dict[str, Any], model: Any, **_: Any) -> None:
        calls = [params, *(next(iter(i.values())) for i in params.get("TransactItems", []) if isinstance(i, dict))]
        for call in calls:
            if (rule := broken_rule(call)) is not None:
                error = {"Error": {"Code": "ValidationException", "Message": f"Invalid expression: {rule}"}}
                raise ClientError(error, model.name)

    client.meta.events.register("before-parameter-build.dynamodb", check)
