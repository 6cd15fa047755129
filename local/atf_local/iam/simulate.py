"""iam:SimulatePrincipalPolicy on the embedded AWS, which moto lacks: the same evaluator the local API
server authorizes with (atf_local.iam.evaluate), over the policies moto's IAM holds.

Served as a method of moto's IAM responses, so moto's own IAM enforcement first checks that the caller
may call iam:SimulatePrincipalPolicy, on the simulated entity's ARN as AWS checks it (moto would check
it against "*").

As AWS answers today: one EvaluationResult per action, its EvalDecision the most restrictive over the
resources (explicitDeny, then implicitDeny, then allowed) and each resource's own decision in
ResourceSpecificResults; MatchedStatements name the policy (SourcePolicyId, SourcePolicyType) but not
the statement's position in it. Taken: PolicySourceArn (a user, group or role), ActionNames,
ResourceArns (default "*"), PolicyInputList (more identity policies to evaluate with the entity's).
Refused with InvalidInput, rather than ignored: the parameters that would need what the evaluator does
not do (resource policies, permissions boundaries, condition context, a caller other than the source).
"""

from __future__ import annotations

import json
from typing import Any

from atf_local.iam.evaluate import ALLOWED, EXPLICIT_DENY, IMPLICIT_DENY, Evaluation, Match, Policy, evaluate
from atf_local.iam.principals import UnknownEntity, policies_of

_UNSUPPORTED = (
    "PermissionsBoundaryPolicyInputList",
    "PolicyExclusionList",
    "ResourcePolicy",
    "ResourceOwner",
    "CallerArn",
    "ContextEntries",
    "ResourceHandlingOption",
)
_RESTRICTIVENESS = {EXPLICIT_DENY: 2, IMPLICIT_DENY: 1, ALLOWED: 0}


def simulate(
    source_arn: str, actions: list[str], resources: list[str], extra: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """SimulatePrincipalPolicy's answer (its output shape in botocore's model). Raises UnknownEntity for a
    source that does not exist."""
    policies = policies_of(source_arn)
    policies += [Policy(f"PolicyInputList.{n}", "none", doc) for n, doc in enumerate(extra or [], start=1)]
    results = []
    for action in actions:
        each = [(resource, evaluate(policies, action, resource)) for resource in resources or ["*"]]
        worst = max((e for _, e in each), key=lambda e: _RESTRICTIVENESS[e.decision])
        result: dict[str, Any] = {
            "EvalActionName": action,
            "EvalDecision": worst.decision,
            "MatchedStatements": _statements(worst),
            "MissingContextValues": [],
            "ResourceSpecificResults": [
                {
                    "EvalResourceName": resource,
                    "EvalResourceDecision": evaluation.decision,
                    "MatchedStatements": _statements(evaluation),
                    "MissingContextValues": [],
                }
                for resource, evaluation in each
            ],
        }
        if len(each) == 1:
            result["EvalResourceName"] = each[0][0]
        results.append(result)
    return {"EvaluationResults": results, "IsTruncated": False}


def _statements(evaluation: Evaluation) -> list[dict[str, str]]:
    return [_statement(m) for m in evaluation.matched]


def _statement(match: Match) -> dict[str, str]:
    return {"SourcePolicyId": match.policy.id, "SourcePolicyType": match.policy.type}


def serve_simulation() -> None:
    """Give moto's IAM the SimulatePrincipalPolicy action (idempotent)."""
    from moto.core.responses import ActionResult
    from moto.iam.exceptions import InvalidInput, NoSuchEntity
    from moto.iam.responses import IamResponse

    if hasattr(IamResponse, "simulate_principal_policy"):
        return

    def simulate_principal_policy(self: Any) -> Any:
        given = [name for name in _UNSUPPORTED if _listed_param(self, name)]
        if given:
            raise InvalidInput(f"the local stack's policy simulator does not take {', '.join(given)}")
        try:
            documents = [json.loads(text) for text in _listed_param(self, "PolicyInputList")]
        except ValueError as error:
            raise InvalidInput(f"PolicyInputList: not a JSON policy document ({error})") from None
        try:
            answer = simulate(
                str(self._get_param("PolicySourceArn")),
                _listed_param(self, "ActionNames"),
                _listed_param(self, "ResourceArns"),
                documents,
            )
        except UnknownEntity as missing:
            raise NoSuchEntity(f"The entity {missing} cannot be found.") from None
        return ActionResult(answer)

    IamResponse.simulate_principal_policy = simulate_principal_policy  # type: ignore[attr-defined]
    determine = IamResponse._determine_resource

    def _determine_resource(self: Any) -> str:
        data = self.data or {}
        if _first(data.get("Action")) == "SimulatePrincipalPolicy" and data.get("PolicySourceArn"):
            return str(_first(data["PolicySourceArn"]))
        return str(determine(self))

    IamResponse._determine_resource = _determine_resource  # type: ignore[method-assign]


def _first(value: Any) -> Any:
    return value[0] if isinstance(value, list) and value else value


def _listed_param(response: Any, name: str) -> list[Any]:
    """A parameter as a list (moto parses IAM's query by botocore's model: a list member is a list)."""
    value = response._get_param(name)
    if isinstance(value, list):
        return value
    return [value] if value else []
