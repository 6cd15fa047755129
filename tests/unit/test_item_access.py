"""ItemAccess (atf_core.item_access): each lambda of a request spanning lambdas asked of IAM in one simulation,
with botocore's Stubber standing in for IAM. Nothing is allowed by default: a denial, an error, a caller IAM
cannot simulate each refuse."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from atf_core.errors import AccessDenied, Unavailable
from atf_core.item_access import ACTION, ItemAccess

API = "arn:aws:execute-api:us-east-1:123456789012:api/prod/POST/v1/lambdas"
A, B, C = (f"{API}/{name}/tasks/batch" for name in "abc")
USER = "arn:aws:iam::123456789012:user/team"
SESSION = "arn:aws:sts::123456789012:assumed-role/deployer/ci-run-7"
ROLE = "arn:aws:iam::123456789012:role/teams/platform/deployer"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def iam() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client("iam", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def _answer(decisions: dict[str, str]) -> dict[str, Any]:
    worst = "explicitDeny" if "explicitDeny" in decisions.values() else "allowed"
    if worst == "allowed" and set(decisions.values()) != {"allowed"}:
        worst = "implicitDeny"
    each = [{"EvalResourceName": r, "EvalResourceDecision": d} for r, d in decisions.items()]
    return {
        "EvaluationResults": [{"EvalActionName": ACTION, "EvalDecision": worst, "ResourceSpecificResults": each}],
        "IsTruncated": False,
    }


def _expect(stubber: Stubber, source: str, decisions: dict[str, str]) -> None:
    given = {"PolicySourceArn": source, "ActionNames": [ACTION], "ResourceArns": sorted(decisions)}
    stubber.add_response("simulate_principal_policy", _answer(decisions), given)


def test_every_lambda_allowed_in_one_simulation(iam: tuple[Any, Stubber]) -> None:
    client, stubber = iam
    _expect(stubber, USER, {A: "allowed", B: "allowed"})
    assert ItemAccess(client).refused(USER, [B, A, A]) == {}


@pytest.mark.parametrize("decision", ["implicitDeny", "explicitDeny"])
def test_a_denied_lambda_is_refused_with_its_decision(iam: tuple[Any, Stubber], decision: str) -> None:
    client, stubber = iam
    _expect(stubber, USER, {A: decision})
    assert ItemAccess(client).refused(USER, [A]) == {A: decision}


def test_a_mix_refuses_only_the_denied_lambda(iam: tuple[Any, Stubber]) -> None:
    client, stubber = iam
    _expect(stubber, USER, {A: "allowed", B: "allowed", C: "implicitDeny"})
    assert ItemAccess(client).refused(USER, [A, B, C]) == {C: "implicitDeny"}


def test_a_resource_iam_did_not_answer_for_is_refused(iam: tuple[Any, Stubber]) -> None:
    client, stubber = iam
    stubber.add_response("simulate_principal_policy", _answer({A: "allowed"}))
    assert ItemAccess(client).refused(USER, [A, B]) == {B: "implicitDeny"}


@pytest.mark.parametrize(
    ("code", "status", "raised"),
    [("Throttling", 400, Unavailable), ("ServiceFailure", 500, Unavailable), ("AccessDenied", 403, Unavailable)],
)
def test_an_iam_error_refuses_never_allows(iam: tuple[Any, Stubber], code: str, status: int, raised: type) -> None:
    client, stubber = iam
    stubber.add_client_error("simulate_principal_policy", code, "no", status)
    with pytest.raises(raised, match=code):
        ItemAccess(client).refused(USER, [A])


def test_an_unreachable_iam_refuses(iam: tuple[Any, Stubber]) -> None:
    from botocore.exceptions import EndpointConnectionError

    client, _ = iam

    def unreachable(**_: Any) -> Any:
        raise EndpointConnectionError(endpoint_url="https://iam.amazonaws.com")

    client.simulate_principal_policy = unreachable
    with pytest.raises(Unavailable, match="could not be reached"):
        ItemAccess(client).refused(USER, [A])


def test_an_assumed_role_session_is_simulated_as_its_role_path_included(iam: tuple[Any, Stubber]) -> None:
    client, stubber = iam
    role = {"Path": "/teams/platform/", "RoleName": "deployer", "RoleId": "AROAEXAMPLE0000000000", "Arn": ROLE}
    stubber.add_response(
        "get_role",
        {"Role": {**role, "CreateDate": "2026-01-01T00:00:00Z"}},
        {"RoleName": "deployer"},
    )
    _expect(stubber, ROLE, {A: "allowed"})
    assert ItemAccess(client).refused(SESSION, [A]) == {}


def test_an_unknown_role_is_refused(iam: tuple[Any, Stubber]) -> None:
    client, stubber = iam
    stubber.add_client_error("get_role", "NoSuchEntity", "gone", 404)
    with pytest.raises(AccessDenied, match="NoSuchEntity"):
        ItemAccess(client).refused(SESSION, [A])


@pytest.mark.parametrize(
    "caller", [None, "arn:aws:sts::123456789012:federated-user/bob", "arn:aws:iam::123456789012:root"]
)
def test_a_caller_iam_cannot_simulate_is_refused_without_asking(iam: tuple[Any, Stubber], caller: str | None) -> None:
    client, _ = iam
    with pytest.raises(AccessDenied):
        ItemAccess(client).refused(caller, [A])


def test_allowed_decisions_are_kept_a_while_refusals_never(iam: tuple[Any, Stubber]) -> None:
    client, stubber = iam
    clock = Clock()
    access = ItemAccess(client, fresh_s=60, clock=clock)
    _expect(stubber, USER, {A: "allowed", C: "implicitDeny"})
    assert access.refused(USER, [A, C]) == {C: "implicitDeny"}
    _expect(stubber, USER, {C: "allowed"})  # only C is asked again: A's allowance is fresh
    assert access.refused(USER, [A, C]) == {}
    clock.now += 30
    assert access.refused(USER, [A, C]) == {}  # no call at all
    clock.now += 31
    _expect(stubber, USER, {A: "implicitDeny"})  # A's allowance has gone stale: asked again
    assert access.refused(USER, [A]) == {A: "implicitDeny"}
    _expect(stubber, "arn:aws:iam::123456789012:user/other", {A: "implicitDeny"})  # per caller
    assert access.refused("arn:aws:iam::123456789012:user/other", [A]) == {A: "implicitDeny"}


@pytest.mark.parametrize(
    "caller", ["arn:aws:sts::999999999999:assumed-role/deployer/x", "arn:aws:iam::999999999999:user/team"]
)
def test_a_caller_of_another_account_is_refused_without_asking(iam: tuple[Any, Stubber], caller: str) -> None:
    """Not judged by this account's role or user of the same name."""
    client, _ = iam
    with pytest.raises(AccessDenied, match="not of the API's account"):
        ItemAccess(client).refused(caller, [A])


def test_allowed_only_given_context_the_simulation_lacks_is_refused(iam: tuple[Any, Stubber]) -> None:
    client, stubber = iam
    answer = _answer({A: "allowed", B: "allowed"})
    answer["EvaluationResults"][0]["ResourceSpecificResults"][1]["MissingContextValues"] = ["aws:SourceIp"]
    stubber.add_response("simulate_principal_policy", answer)
    assert ItemAccess(client).refused(USER, [A, B]) == {B: "missingContext"}
