"""The AWS actions each data-access method makes, declared on the method itself.

The store (atf_core.store) and the queue directory (atf_core.queues) are the
only places that call DynamoDB and the consumer's SQS. Each of their public
methods carries `@calls(...)`: the IAM actions it needs, or the methods of
another store it works through. A component's policy is then the union over
the classes it is built from (`actions_of`), so a grant cannot be forgotten
or left behind when the code changes. A unit test runs every declared method
against an embedded AWS and checks that the declaration equals what the
method really calls.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
Via = Callable[..., Any]

_DECLARED = "__atf_calls__"
_ACTION = re.compile(r"^[a-z0-9-]+:[A-Z][A-Za-z]+$")


# IAM authorizes a batch call under the action of its single call: the one place that says so.
AUTHORIZED_AS = {
    "sqs:SendMessageBatch": "sqs:SendMessage",
    "sqs:DeleteMessageBatch": "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
}


def authorized_as(service: str, operation: str) -> str:
    """The IAM action AWS checks for an API operation ("sqs", "SendMessageBatch" -> "sqs:SendMessage")."""
    action = f"{service}:{operation}"
    return AUTHORIZED_AS.get(action, action)


def calls(*made: str | Via) -> Callable[[F], F]:
    """Declare what a method calls: IAM actions ("dynamodb:Query") and the declared methods it calls through.

    An action is named as IAM authorizes it: SQS's SendMessageBatch is `sqs:SendMessage` (AUTHORIZED_AS).
    """
    for what in made:
        if isinstance(what, str) and not _ACTION.match(what):
            raise ValueError(f"{what!r} is not an IAM action such as 'dynamodb:Query'")
        if isinstance(what, str) and what in AUTHORIZED_AS:
            raise ValueError(f"{what!r} is authorized as {AUTHORIZED_AS[what]!r}: declare that")
        if not isinstance(what, str) and declared(what) is None:
            raise ValueError(f"{what!r} declares no calls of its own")

    def declare(method: F) -> F:
        setattr(method, _DECLARED, made)
        return method

    return declare


def declared(method: Callable[..., Any]) -> frozenset[str] | None:
    """The actions a method makes, those of the methods it calls through included; None if it declares none."""
    made: tuple[str | Via, ...] | None = getattr(method, _DECLARED, None)
    if made is None:
        return None
    found: set[str] = set()
    for what in made:
        found |= {what} if isinstance(what, str) else declared(what) or set()
    return frozenset(found)


def declarations(cls: type) -> dict[str, frozenset[str]]:
    """Each declared method of a class (inherited ones included) and its actions."""
    found: dict[str, frozenset[str]] = {}
    for name in dir(cls):
        actions = declared(getattr(cls, name))
        if actions is not None:
            found[name] = actions
    return found


Part = type | Via


def actions_of(*parts: Part) -> frozenset[str]:
    """Every action the given parts make: the policy of a component built from them. A part is a class (all
    its declared methods) or one declared method, for a class a component uses only in part."""
    found: set[str] = set()
    for part in parts:
        if isinstance(part, type):
            found.update(action for actions in declarations(part).values() for action in actions)
        elif (actions := declared(part)) is not None:
            found |= actions
        else:
            raise ValueError(f"{part!r} declares no calls")
    return frozenset(found)
