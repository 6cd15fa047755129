"""Requests that span lambdas (issue 19): a batch or a chain whose items name several lambdas is let in by IAM for
a grant of one lambda, and the frontend checks each item's lambda against the caller's identity (one
iam:SimulatePrincipalPolicy on the embedded AWS, under the frontend's own enforced role) before writing
anything. Signatures verified, policies the ones grant_use / grant_operate emit."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable

import pytest

from atf_core.access import Kind, grant_patterns
from atf_core.errors import AccessDenied
from atf_core.schema import ScheduleRequest
from atf_local.gateway_auth import execute_api_arn
from atf_local.iam.accounts import add_user, operator_session, operator_trust, session_of
from atf_local.stack import LocalStack
from atf_sdk.client import AtfClient, RetryPolicy

LATER = 3600.0
GRANTED, NOT_GRANTED = ("work", "mail"), "report"


def _statements(grants: dict[Kind, tuple[str, ...]]) -> list[dict[str, object]]:
    arns = [execute_api_arn(m, p) for kind, names in grants.items() for m, p in grant_patterns(kind, names, False)]
    return [{"Effect": "Allow", "Action": "execute-api:Invoke", "Resource": arns}]


def _team(stack: LocalStack, grants: dict[Kind, tuple[str, ...]]) -> AtfClient:
    keys = add_user(stack.endpoint, f"team-{uuid.uuid4().hex[:10]}", _statements(grants))
    return _client(stack, keys)


def _client(stack: LocalStack, keys: dict[str, str]) -> AtfClient:
    return AtfClient(stack.api_url, region="us-east-1", session=session_of(keys), retry=RetryPolicy(attempts=1))


def _tasks(*lambdas: str) -> list[ScheduleRequest]:
    made = [{"lambda": name, "delay_seconds": LATER, "key": uuid.uuid4().hex} for name in lambdas]
    return [ScheduleRequest.model_validate(task) for task in made]


def _chain(*lambdas: str) -> dict[str, object]:
    links = [{"name": f"l{i}", "lambda": name, "after": [f"l{i - 1}"] if i else []} for i, name in enumerate(lambdas)]
    return {"links": links, "key": uuid.uuid4().hex}


@pytest.fixture(scope="module")
def team(stack: LocalStack) -> AtfClient:
    """Granted use and operate on work and mail, not on report."""
    return _team(stack, {"use": GRANTED, "operate": GRANTED})


def test_a_team_granted_two_lambdas_batches_and_chains_across_them(team: AtfClient) -> None:
    results = team.schedule_many(_tasks("work", "mail", "work"))
    assert [r.status for r in results] == [201, 201, 201]
    view = team.create_chain(_chain("work", "mail"))
    assert [link.name for link in view.links] == ["l0", "l1"]


@pytest.mark.parametrize("kind", ["batch", "chain"])
def test_an_item_of_a_lambda_not_granted_refuses_the_whole_request_naming_it(
    team: AtfClient, item_count: Callable[[], int], kind: str
) -> None:
    before = item_count()
    with pytest.raises(AccessDenied) as refused:
        if kind == "batch":
            team.schedule_many(_tasks("work", "mail", NOT_GRANTED))
        else:
            team.create_chain(_chain("work", NOT_GRANTED, "mail"))
    error = refused.value
    assert error.status == 403 and error.code == "access_denied"
    assert error.field == ("tasks[2].lambda" if kind == "batch" else "links[1].lambda")
    assert f"lambda {NOT_GRANTED!r}" in error.message
    assert ("use" if kind == "batch" else "operate") in error.message
    route = "tasks/batch" if kind == "batch" else "chains"
    assert f"/POST/v1/lambdas/{NOT_GRANTED}/{route}" in error.message
    assert item_count() == before


def test_a_use_only_team_cannot_create_a_chain(stack: LocalStack, item_count: Callable[[], int]) -> None:
    user = _team(stack, {"use": GRANTED})
    before = item_count()
    with pytest.raises(AccessDenied, match="POST/v1/chains"):  # API Gateway: no operate grant lets it in
        user.create_chain(_chain("work", "mail"))
    assert item_count() == before
    assert [r.status for r in user.schedule_many(_tasks("work", "mail"))] == [201, 201]


def test_each_item_needs_the_routes_own_kind_on_its_lambda(stack: LocalStack, item_count: Callable[[], int]) -> None:
    """Operate on work and use on both: a chain across both is refused naming mail (operate lacking there)."""
    user = _team(stack, {"use": GRANTED, "operate": ("work",)})
    before = item_count()
    with pytest.raises(AccessDenied, match="operate on lambda 'mail'"):
        user.create_chain(_chain("work", "mail"))
    assert item_count() == before


def test_an_assumed_role_with_a_path_is_checked_as_its_role(stack: LocalStack) -> None:
    """The session's ARN (assumed-role/NAME/SESSION) drops the role's path: the frontend reads the role by name."""
    session = operator_session()
    iam = session.client("iam", endpoint_url=stack.endpoint)
    name = f"team-{uuid.uuid4().hex[:10]}"
    trust = json.dumps(operator_trust())
    role = iam.create_role(RoleName=name, Path="/teams/platform/", AssumeRolePolicyDocument=trust)
    document = {"Version": "2012-10-17", "Statement": _statements({"use": GRANTED})}
    iam.put_role_policy(RoleName=name, PolicyName="grants", PolicyDocument=json.dumps(document))
    sts = session.client("sts", endpoint_url=stack.endpoint)
    given = sts.assume_role(RoleArn=role["Role"]["Arn"], RoleSessionName="ci")["Credentials"]
    keys = {
        "AWS_ACCESS_KEY_ID": given["AccessKeyId"],
        "AWS_SECRET_ACCESS_KEY": given["SecretAccessKey"],
        "AWS_SESSION_TOKEN": given["SessionToken"],
    }
    client = _client(stack, keys)
    assert [r.status for r in client.schedule_many(_tasks("work", "mail"))] == [201, 201]
    with pytest.raises(AccessDenied, match=f"use on lambda '{NOT_GRANTED}'"):
        client.schedule_many(_tasks("work", NOT_GRANTED))
