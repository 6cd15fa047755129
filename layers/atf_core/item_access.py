"""Whether a caller may call a route for each lambda a request spans: IAM asked, as API Gateway would have.

A batch or a chain names a lambda per item, so API Gateway's own check (execute-api:Invoke on the request's
ARN) cannot tell one lambda from another. For each item, the frontend asks IAM whether the caller's identity
policies allow execute-api:Invoke on the ARN of the item's scoped twin route (atf_core.access.Route.twin):
one iam:SimulatePrincipalPolicy call for every lambda of the request (per-resource results), with the
caller's IAM user or role as the policy source.

What IAM's simulation evaluates, and what it does not (docs/api.md, "Requests that span lambdas"): the
entity's identity policies (inline, attached, its groups'), its permissions boundary and the account's SCPs;
not resource policies, the real request's condition keys, or an assumed-role session's own session policy
(API Gateway still applies those to the spanning route itself). A request is allowed only when every item's
lambda is "allowed", and not merely allowed given condition keys the simulation was not given (its result's
MissingContextValues: refused). A caller of another account is refused without asking: IAM would simulate
this account's user or role of the same name.

An assumed role's session ARN (arn:aws:sts::A:assumed-role/ROLE/SESSION) drops the role's path, which the
role's ARN keeps (arn:aws:iam::A:role/PATH/ROLE): iam:GetRole by name gives the real one.

Decisions that allowed are kept `fresh_s` seconds per (caller, resource) in this warm container, so a principal
granted every lambda pays one simulation per lambda per period, not one per request; a refusal is never kept
(a grant just given applies at once; one just revoked within `fresh_s`, about IAM's own propagation delay).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from atf_core.calls import calls
from atf_core.errors import AccessDenied, Unavailable

ACTION = "execute-api:Invoke"
ALLOWED = "allowed"
FRESH_S = 60.0
# boto3's IAM client (no type stubs are installed for it).
IamClient = Any
_ASSUMED_ROLE = re.compile(r"^arn:(?P<partition>[^:]+):sts::(?P<account>\d{12}):assumed-role/(?P<role>[^/]+)/[^/]+$")
_ENTITY = re.compile(r"^arn:[^:]+:iam::\d{12}:(user|role)/.+$")
MISSING_CONTEXT = "missingContext"  # allowed only given condition keys the simulation lacks: refused


class ItemAccess:
    """execute-api:Invoke decisions for one caller over many resources, asked of IAM (an injectable client)."""

    def __init__(self, iam: IamClient, fresh_s: float = FRESH_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._iam = iam
        self._fresh_s = fresh_s
        self._clock = clock
        self._allowed: dict[tuple[str, str], float] = {}  # (caller, resource) -> when IAM allowed it
        self._roles: dict[str, tuple[float, str]] = {}  # session ARN's role name -> (when read, role ARN)
        self._lock = threading.Lock()

    def refused(self, caller_arn: str | None, resources: Iterable[str]) -> dict[str, str]:
        """Each resource IAM does not allow the caller, with its decision (implicitDeny, explicitDeny); empty
        when every one is allowed. Raises AccessDenied for a caller IAM cannot simulate, Unavailable when IAM
        does not answer: never allows by default."""
        wanted = sorted(set(resources))
        if caller_arn is None:
            raise AccessDenied("the request carries no caller identity to check each lambda against")
        _same_account(caller_arn, wanted)
        now = self._clock()
        with self._lock:
            unknown = [r for r in wanted if now - self._allowed.get((caller_arn, r), -float("inf")) >= self._fresh_s]
        if not unknown:
            return {}
        decisions = self.decisions(self.source_arn(caller_arn), unknown)
        with self._lock:
            for resource in (r for r in unknown if decisions.get(r) == ALLOWED):
                self._allowed[(caller_arn, resource)] = now
        return {r: decisions.get(r, "implicitDeny") for r in unknown if decisions.get(r) != ALLOWED}

    @calls("iam:GetRole")
    def source_arn(self, caller_arn: str) -> str:
        """The IAM user or role whose policies decide for the caller (a session: its role, path included)."""
        if _ENTITY.match(caller_arn):
            return caller_arn
        session = _ASSUMED_ROLE.match(caller_arn)
        if session is None:
            raise AccessDenied(f"{caller_arn} is not an IAM user or role session: its lambdas cannot be checked")
        name, now = session["role"], self._clock()
        with self._lock:
            read_at, arn = self._roles.get(name, (-float("inf"), ""))
        if now - read_at < self._fresh_s:
            return arn
        arn = str(self._ask(lambda: self._iam.get_role(RoleName=name))["Role"]["Arn"])
        with self._lock:
            self._roles[name] = (now, arn)
        return arn

    @calls("iam:SimulatePrincipalPolicy")
    def decisions(self, source_arn: str, resources: list[str]) -> dict[str, str]:
        """IAM's decision on execute-api:Invoke for each resource, in one simulation (pages read to the end)."""
        found: dict[str, str] = {}
        asked: dict[str, Any] = {"PolicySourceArn": source_arn, "ActionNames": [ACTION], "ResourceArns": resources}
        while True:
            answer = self._ask(lambda: self._iam.simulate_principal_policy(**asked))
            for result in answer["EvaluationResults"]:
                for each in result.get("ResourceSpecificResults") or []:
                    found[each["EvalResourceName"]] = _decision(each["EvalResourceDecision"], each)
                if not result.get("ResourceSpecificResults") and "EvalResourceName" in result:
                    found[result["EvalResourceName"]] = _decision(result["EvalDecision"], result)
            if not answer.get("IsTruncated"):
                return found
            asked["Marker"] = answer["Marker"]

    def _ask(self, call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        try:
            return call()
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            if code == "NoSuchEntity":
                raise AccessDenied(f"IAM knows no such caller to check each lambda against ({code})") from None
            raise Unavailable(f"IAM could not check the caller's permission on each lambda ({code})") from None
        except BotoCoreError as error:
            raise Unavailable(f"IAM could not be reached to check each lambda ({type(error).__name__})") from None


def _decision(decision: str, result: dict[str, Any]) -> str:
    """IAM's decision, but an "allowed" that holds only given context keys the simulation was not given (a
    policy conditioned on aws:SourceIp, a tag, ...) is not taken as allowed: refusing is the safe side."""
    if decision == ALLOWED and result.get("MissingContextValues"):
        return MISSING_CONTEXT
    return decision


def _same_account(caller_arn: str, resources: list[str]) -> None:
    """A caller of another account (an API resource policy can let one in) would be simulated as this
    account's user or role of the same name: refused before asking IAM."""
    caller_account = caller_arn.split(":")[4] if caller_arn.count(":") >= 5 else ""
    for resource in resources:
        if resource.split(":")[4] != caller_account:
            raise AccessDenied(
                f"{caller_arn} is not of the API's account: its lambdas are checked only for callers of the account"
            )
