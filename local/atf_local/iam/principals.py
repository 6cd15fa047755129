"""Who an access key belongs to on the embedded AWS, and the policies that decide for them: read from
moto's IAM and STS backends in this process (the stack's first server, atf_local.servers, holds them).

An IAM user's access key carries the user's inline policies, its attached managed policies and those of
its groups; an assumed role's session carries the role's inline and attached policies (and, where the
session was given one, its session policy, which can only narrow them).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import Any
from urllib.parse import unquote

from atf_local.iam.evaluate import Policy
from atf_local.iam.roles import ACCOUNT


@dataclass(frozen=True)
class Principal:
    """The caller an access key stands for, as API Gateway's request context names it."""

    arn: str  # the user's ARN, or the session's (arn:aws:sts::...:assumed-role/ROLE/SESSION)
    source_arn: str  # the IAM entity whose policies apply: the user, or the role
    caller: str  # the user's id, or ROLEID:SESSION
    access_key_id: str
    secret_access_key: str
    session_token: str | None = None  # a session's: the request must carry it
    expires: datetime | None = None  # a session's end (UTC, naive as moto keeps it)
    session_policy: Policy | None = field(default=None, compare=False)
    policies: tuple[Policy, ...] = field(default=(), compare=False)  # the identity policies that decide


class UnknownEntity(LookupError):
    """No user, group or role by that ARN."""


def principal_for_key(access_key_id: str) -> Principal | None:
    """The active IAM user key or STS session with this id, with the policies that decide for it; None
    where there is none."""
    for _ in range(_READS - 1):
        try:
            return _with_policies(access_key_id)
        except RuntimeError:  # moto's server threads changed a dict while it was read: read again
            continue
    return _with_policies(access_key_id)


_READS = 3


def _with_policies(access_key_id: str) -> Principal | None:
    found = _holder(access_key_id)
    if found is None:
        return None
    try:
        return replace(found, policies=tuple(policies_of(found.source_arn)))
    except UnknownEntity:  # a session of a role deleted since: it holds nothing
        return found


def to_record(principal: Principal) -> dict[str, Any]:
    """The principal as JSON, for a process without the embedded AWS's backends (`from_record` reads it)."""
    record = asdict(principal)
    record["expires"] = principal.expires.isoformat() if principal.expires else None
    return record


def from_record(record: dict[str, Any]) -> Principal:
    fields = dict(record)
    policies = tuple(Policy(**p) for p in fields.pop("policies"))
    session, expires = fields.pop("session_policy"), fields.pop("expires")
    return Principal(
        **fields,
        expires=datetime.fromisoformat(expires) if expires else None,
        session_policy=Policy(**session) if session else None,
        policies=policies,
    )


def lookup_at(endpoint: str, fresh_s: float = 5.0) -> Callable[[str], Principal | None]:
    """`principal_for_key` asked of the stack at `endpoint`, for a process without its backends; an answer
    is kept `fresh_s` seconds (a benchmark's API process must not double the embedded AWS's load), so a
    policy changed meanwhile applies there that much later."""
    from urllib.request import Request, urlopen

    from atf_local.servers import PRINCIPALS_PATH

    kept: dict[str, tuple[float, Principal | None]] = {}

    def lookup(access_key_id: str) -> Principal | None:
        at, found = kept.get(access_key_id, (float("-inf"), None))
        if time.monotonic() - at < fresh_s:
            return found
        body = json.dumps({"access_key_id": access_key_id}).encode()
        with urlopen(Request(endpoint + PRINCIPALS_PATH, data=body, method="POST"), timeout=10) as answer:
            record = json.loads(answer.read())["principal"]  # the stack's own loopback server
        found = from_record(record) if record else None
        kept[access_key_id] = (time.monotonic(), found)
        return found

    return lookup


def _holder(access_key_id: str) -> Principal | None:
    backend = _iam()
    for user in backend.list_users("/", None, None):
        for key in user.access_keys:
            if key.access_key_id == access_key_id and key.status == "Active":
                return Principal(user.arn, user.arn, user.id, access_key_id, key.secret_access_key)
    for session in _sts().assumed_roles:
        if session.access_key_id == access_key_id:
            role_name = session.role_arn.rsplit("/", 1)[-1]
            arn = f"arn:aws:sts::{ACCOUNT}:assumed-role/{role_name}/{session.session_name}"
            narrowed = Policy("session", "none", json.loads(session.policy)) if session.policy else None
            return Principal(
                arn,
                session.role_arn,
                session.user_id,
                access_key_id,
                session.secret_access_key,
                session.session_token,
                session.expiration,
                narrowed,
            )
    return None


def policies_of(source_arn: str) -> list[Policy]:
    """The identity policies of the user, group or role `source_arn` names (a user's groups' too)."""
    backend = _iam()
    kind, _, name = source_arn.split(":", 5)[-1].partition("/")
    name = name.rsplit("/", 1)[-1]  # past the entity's path
    try:
        if kind == "user":
            user = backend.get_user(name)
            found = _held(user, "user")
            for group in backend.get_groups_for_user(name):
                found += _held(group, "group")
            return found
        if kind == "group":
            return _held(backend.get_group(name), "group")
        if kind == "role":
            return _held(backend.get_role(name), "role")
    except Exception as missing:  # moto's NoSuchEntity and the like
        raise UnknownEntity(source_arn) from missing
    raise UnknownEntity(source_arn)


def _held(entity: Any, kind: str) -> list[Policy]:
    inline = [Policy(name, kind, _document(text)) for name, text in entity.policies.items()]
    managed = [
        Policy(arn, "aws-managed" if ":iam::aws:" in arn else "user-managed", _document(_default_version(policy)))
        for arn, policy in entity.managed_policies.items()
    ]
    return inline + managed


def _default_version(policy: Any) -> str:
    return next(str(v.document) for v in policy.versions if v.is_default)


def _document(text: str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(text, dict):
        return text
    try:
        return dict(json.loads(text))
    except ValueError:
        return dict(json.loads(unquote(text)))  # IAM's API hands documents out URL-encoded


def _iam() -> Any:
    from moto.iam.models import iam_backends

    return iam_backends[ACCOUNT]["aws"]


def _sts() -> Any:
    from moto.sts.models import sts_backends

    return sts_backends[ACCOUNT]["aws"]
