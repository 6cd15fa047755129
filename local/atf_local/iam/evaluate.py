"""IAM's decision for one action on one resource, from identity policy documents: pure functions.

What the local API server (atf_local.api_server) asks for every request, as API Gateway asks IAM for
`execute-api:Invoke`, and what the local iam:SimulatePrincipalPolicy (atf_local.iam.simulate) answers.

The rules are IAM's for policies of one account: an explicit Deny wins; else an Allow decides; else the
request is implicitly denied. A statement matches when its Action (or NotAction) and its Resource (or
NotResource) match. Actions compare without regard to case; resources with it. `*` matches any run of
characters and `?` any one; in an ARN a wildcard stays within its colon-separated segment unless it ends
the segment (IAM's rule), and in the resource part (after the fifth colon) it spans anything, `/` too.

Conditions are not evaluated: no condition key of a real request is known here. A statement with a
Condition therefore never allows (an Allow it would give is not proven), and a Deny with one always
denies (the condition might hold): the local stack refuses where AWS might not, never the other way round.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Decision = Literal["allowed", "explicitDeny", "implicitDeny"]
ALLOWED: Decision = "allowed"
EXPLICIT_DENY: Decision = "explicitDeny"
IMPLICIT_DENY: Decision = "implicitDeny"
_ARN_SEGMENTS = 6  # arn:partition:service:region:account:resource


@dataclass(frozen=True)
class Policy:
    """One policy document and where it comes from, named as iam:SimulatePrincipalPolicy names it."""

    id: str  # the inline policy's name, or the managed policy's ARN
    type: str  # user, group, role, aws-managed, user-managed, none
    document: dict[str, Any]


@dataclass(frozen=True)
class Match:
    """A statement that decided: the policy holding it and its index in the policy's Statement list."""

    policy: Policy
    index: int


@dataclass(frozen=True)
class Evaluation:
    decision: Decision
    matched: tuple[Match, ...] = ()  # the Deny statements that matched, or else the Allow ones

    @property
    def allowed(self) -> bool:
        return self.decision == ALLOWED


def evaluate(policies: Iterable[Policy], action: str, resource: str) -> Evaluation:
    """IAM's decision for `action` on `resource` under `policies` (identity policies of one account)."""
    allows: list[Match] = []
    denies: list[Match] = []
    for policy in policies:
        for index, statement in enumerate(statements(policy.document)):
            effect = statement.get("Effect")
            if effect not in ("Allow", "Deny") or not applies(statement, action, resource):
                continue
            if effect == "Deny":
                denies.append(Match(policy, index))
            elif "Condition" not in statement:
                allows.append(Match(policy, index))
    if denies:
        return Evaluation(EXPLICIT_DENY, tuple(denies))
    if allows:
        return Evaluation(ALLOWED, tuple(allows))
    return Evaluation(IMPLICIT_DENY)


def statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    """A document's statements: IAM takes one statement object in place of a list of them."""
    found = document.get("Statement", [])
    return [s for s in _listed(found) if isinstance(s, dict)]


def applies(statement: dict[str, Any], action: str, resource: str) -> bool:
    """Whether the statement's action and resource elements cover `action` on `resource` (its effect and
    condition aside)."""
    if "Action" in statement:
        acts = any(action_matches(p, action) for p in _listed(statement["Action"]))
    else:
        acts = "NotAction" in statement and not any(action_matches(p, action) for p in _listed(statement["NotAction"]))
    if not acts:
        return False
    if "Resource" in statement:
        return any(resource_matches(p, resource) for p in _listed(statement["Resource"]))
    excluded = _listed(statement.get("NotResource", []))
    return "NotResource" in statement and not any(resource_matches(p, resource) for p in excluded)


def action_matches(pattern: str, action: str) -> bool:
    """`service:Name` against an action pattern: wildcards anywhere, case ignored."""
    return _wildcard(str(pattern).lower(), arn=False).fullmatch(action.lower()) is not None


def resource_matches(pattern: str, resource: str) -> bool:
    """An ARN against a Resource pattern, with IAM's wildcards (the module's docstring)."""
    return _wildcard(str(pattern), arn=True).fullmatch(resource) is not None


@functools.lru_cache(maxsize=4096)
def _wildcard(pattern: str, arn: bool) -> re.Pattern[str]:
    if not arn or pattern == "*" or not pattern.startswith("arn:"):
        return re.compile(_translate(pattern, "."), re.DOTALL)
    segments = pattern.split(":", _ARN_SEGMENTS - 1)
    parts = []
    for number, segment in enumerate(segments):
        last_segment = number == len(segments) - 1
        inner = _translate(segment.removesuffix("*"), "." if last_segment else "[^:]")
        trailing = ".*" if segment.endswith("*") else ""  # a segment's final * may run past its colons
        parts.append(inner + trailing)
    return re.compile(":".join(parts), re.DOTALL)


def _translate(pattern: str, any_char: str) -> str:
    out = []
    for char in pattern:
        if char == "*":
            out.append(any_char + "*")
        elif char == "?":
            out.append(any_char)
        else:
            out.append(re.escape(char))
    return "".join(out)


def _listed(value: Any) -> Sequence[Any]:
    return value if isinstance(value, list) else [value]
