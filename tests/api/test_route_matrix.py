"""Who may touch which lambda, route by route (issue 19), with signatures verified and IAM policies decided
by the local API as API Gateway decides them.

For every route of atf_core.access.ROUTES, on lambda "chore":
- a principal granted the route's kind on chore (the statements grant_use / grant_operate emit) succeeds;
- a principal granted both kinds on another lambda ("work") is refused: 403, AccessDenied naming the
  route's resource (so the lambda), nothing written;
- a principal granted only the other kind on chore is refused the same way;
- an all-lambdas route (its path names no lambda) passes only a principal granted every lambda;
- a spanning route (a batch, a chain) passes a principal granted its kind on the request's lambdas; one
  granted another lambda is refused by the frontend naming the item's lambda (its scoped twin's resource).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from botocore.credentials import Credentials

from atf_core.access import KINDS, ROUTES, Kind, Route, grant_patterns
from atf_local.gateway_auth import execute_api_arn
from atf_local.iam.accounts import add_user
from atf_local.stack import LocalStack
from atf_sdk.client import AtfClient
from tests.api.conftest import Raw, Reply
from tests.api.route_requests import prepare

TARGET, OTHER = "chore", "work"
Grants = dict[Kind, list[str]]


def _statements(grants: Grants, every_lambda: bool, lambdas: list[str]) -> list[dict[str, object]]:
    resources = [
        execute_api_arn(method, path)
        for kind, names in grants.items()
        for method, path in grant_patterns(kind, lambdas if every_lambda else names, every_lambda)
    ]
    return [{"Effect": "Allow", "Action": "execute-api:Invoke", "Resource": resources}] if resources else []


@pytest.fixture(scope="module")
def principal(stack: LocalStack) -> Iterator[Callable[..., Credentials]]:
    made: dict[tuple[object, ...], Credentials] = {}
    lambdas = sorted(stack.config.lambdas)

    def of(grants: Grants, every_lambda: bool = False) -> Credentials:
        key = (tuple(sorted((k, tuple(v)) for k, v in grants.items())), every_lambda)
        if key not in made:
            keys = add_user(stack.endpoint, f"team-{uuid.uuid4().hex[:10]}", _statements(grants, every_lambda, lambdas))
            made[key] = Credentials(keys["AWS_ACCESS_KEY_ID"], keys["AWS_SECRET_ACCESS_KEY"])
        return made[key]

    yield of


def _other(kind: Kind) -> Kind:
    return next(k for k in KINDS if k != kind)


def _refused(reply: Reply, route: Route, path: str) -> None:
    assert reply.status == 403, f"{route.method} {route.path}: {reply.status} {reply.body}"
    message = reply.body["message"]
    assert "is not authorized to perform: execute-api:Invoke" in message, message
    assert execute_api_arn(route.method, path.split("?")[0]) in message, message


@pytest.mark.parametrize("route", [r for r in ROUTES if r.scoped], ids=lambda r: f"{r.method} {r.path}")
def test_a_lambdas_route_lets_its_grantees_in_and_refuses_others_writing_nothing(
    route: Route, client: AtfClient, raw: Raw, principal: Callable[..., Credentials], item_count: Callable[[], int]
) -> None:
    request = prepare(route, TARGET, client)
    refused_by = {
        f"both kinds on {OTHER}": principal({"use": [OTHER], "operate": [OTHER]}),
        f"{_other(route.kind)} on {TARGET}": principal({_other(route.kind): [TARGET]}),
    }
    before = item_count()
    for who, credentials in refused_by.items():
        reply = raw(request.method, request.path, request.body, credentials=credentials)
        _refused(reply, route, request.path)
        assert item_count() == before, f"a refusal ({who}) wrote to the table"

    allowed = raw(request.method, request.path, request.body, credentials=principal({route.kind: [TARGET]}))
    assert allowed.status == request.allowed_status, f"{route.method} {route.path}: {allowed.status} {allowed.body}"


@pytest.mark.parametrize("route", [r for r in ROUTES if r.spanning], ids=lambda r: f"{r.method} {r.path}")
def test_a_spanning_route_lets_in_the_grantees_of_its_items_lambdas(
    route: Route, client: AtfClient, raw: Raw, principal: Callable[..., Credentials], item_count: Callable[[], int]
) -> None:
    request = prepare(route, TARGET, client)
    before = item_count()
    other_kind = raw(request.method, request.path, request.body, credentials=principal({_other(route.kind): [TARGET]}))
    _refused(other_kind, route, request.path)  # by API Gateway: no grant of the route's kind at all
    elsewhere = principal({"use": [OTHER], "operate": [OTHER]})
    reply = raw(request.method, request.path, request.body, credentials=elsewhere)
    assert (reply.status, reply.body["code"]) == (403, "access_denied"), reply.body
    twin = route.twin()
    assert execute_api_arn(twin.method, twin.build(lambda_name=TARGET)) in reply.body["message"], reply.body
    assert item_count() == before

    allowed = raw(request.method, request.path, request.body, credentials=principal({route.kind: [TARGET]}))
    assert allowed.status == request.allowed_status, f"{route.method} {route.path}: {allowed.status} {allowed.body}"


@pytest.mark.parametrize(
    "route", [r for r in ROUTES if not r.scoped and not r.spanning], ids=lambda r: f"{r.method} {r.path}"
)
def test_a_route_for_all_lambdas_needs_a_grant_of_every_lambda(
    route: Route, client: AtfClient, raw: Raw, principal: Callable[..., Credentials], item_count: Callable[[], int]
) -> None:
    request = prepare(route, TARGET, client)
    before = item_count()
    for credentials in (principal({"use": [TARGET], "operate": [TARGET]}), principal({_other(route.kind): []}, True)):
        _refused(raw(request.method, request.path, request.body, credentials=credentials), route, request.path)
    assert item_count() == before

    allowed = raw(request.method, request.path, request.body, credentials=principal({route.kind: []}, True))
    assert allowed.status == request.allowed_status, f"{route.method} {route.path}: {allowed.status} {allowed.body}"


@pytest.mark.parametrize("kind", KINDS)
def test_the_api_document_is_open_to_a_grant_of_either_kind_on_one_lambda(
    kind: Kind, raw: Raw, principal: Callable[..., Credentials]
) -> None:
    reply = raw("GET", "/v1/openapi.json", None, credentials=principal({kind: [TARGET]}))
    assert reply.status == 200 and "/v1/lambdas/{lambda_name}/tasks" in reply.body["paths"], reply.status
