"""One lambda's routes (/v1/lambdas/{lambda_name}/..., issue 19) on the local stack: each answers a valid request
for its lambda (tests/api/route_requests.py builds one for every route of atf_core.access.ROUTES), and a
lambda's route never reaches another lambda's task, schedule or chain: that is not found (404, as if it did
not exist), a body naming another lambda is refused naming the field (400), and nothing is written or changed."""

from __future__ import annotations

from typing import Any

import pytest

from atf_core.access import ROUTES, Route
from atf_sdk.client import AtfClient
from tests.api.conftest import Raw
from tests.api.route_requests import prepare

MINE, OTHER = "chore", "mail"
# A body that names the lambda: sent on another lambda's path, it is refused naming this field.
NAMED_IN_BODY = {
    ("POST", "/tasks"): "lambda",
    ("POST", "/tasks/batch"): "tasks[0].lambda",
    ("POST", "/tasks/bulk/cancel"): "lambda",
    ("POST", "/tasks/bulk/reschedule"): "lambda",
    ("POST", "/tasks/bulk/reprioritise"): "lambda",
    ("PUT", "/schedules/{name}"): "lambda",
    ("POST", "/chains"): "links[0].lambda",
}
# An id in the path (a task, schedule or chain of MINE): on another lambda's path, not found.
NAMED_BY_ID = ("task_id", "chain_id", "name")


@pytest.mark.parametrize("found", ROUTES, ids=lambda r: f"{r.method} {r.path}")
def test_every_route_answers_a_valid_request_for_a_lambda(found: Route, client: AtfClient, raw: Raw) -> None:
    request = prepare(found, MINE, client)
    reply = raw(request.method, request.path, request.body)
    assert reply.status == request.allowed_status, (request, reply.body)


def _suffix(found: Route) -> tuple[str, str]:
    return found.method, found.path.removeprefix("/v1/lambdas/{lambda_name}")


# The lambda routes that name something of a lambda's besides the path: an id, or a lambda in the body.
# (The others, gates, stats, dead letters and the schedule list, act on the path's lambda itself.)
REACHING = [r for r in ROUTES if r.scoped and (_suffix(r) in NAMED_IN_BODY or set(r.parameters) & set(NAMED_BY_ID))]


@pytest.mark.parametrize("found", REACHING, ids=lambda r: f"{r.method} {r.path}")
def test_a_lambdas_route_never_reaches_another_lambdas_things(
    found: Route, client: AtfClient, raw: Raw, item_count: Any
) -> None:
    field = NAMED_IN_BODY.get(_suffix(found))
    by_id = [p for p in found.parameters if p in NAMED_BY_ID]
    request = prepare(found, MINE, client)
    before = _state(client, request.path)
    count = item_count()
    reply = raw(request.method, request.path.replace(f"/v1/lambdas/{MINE}/", f"/v1/lambdas/{OTHER}/"), request.body)
    if by_id and _suffix(found) != ("PUT", "/schedules/{name}"):
        assert (reply.status, reply.body["code"]) == (404, "not_found"), reply.body
        assert MINE not in reply.body["message"], "a 404 must not say whose it is"
    else:
        assert (reply.status, reply.body["field"]) == (400, field), reply.body
    assert item_count() == count
    assert _state(client, request.path) == before


def test_a_schedule_name_another_lambda_holds_is_a_conflict(client: AtfClient, raw: Raw, item_count: Any) -> None:
    client.put_schedule("taken-by-chore", {"lambda": MINE, "every_seconds": 3600})
    count = item_count()
    reply = raw("PUT", f"/v1/lambdas/{OTHER}/schedules/taken-by-chore", {"lambda": OTHER, "every_seconds": 60})
    assert (reply.status, reply.body["field"]) == (409, "name"), reply.body
    assert item_count() == count
    assert client.get_schedule("taken-by-chore").spec.lambda_ == MINE


def test_the_sdk_takes_the_lambdas_routes_and_finds_only_its_own(client: AtfClient) -> None:
    task = client.schedule(MINE, delay_seconds=3600)
    assert client.get(task.id, lambda_name=MINE).id == task.id
    from atf_core.errors import NotFound

    with pytest.raises(NotFound):
        client.cancel(task.id, lambda_name=OTHER)
    assert client.cancel(task.id, lambda_name=MINE).status.value == "cancelled"
    chain = client.create_chain({"links": [{"name": "a", "lambda": MINE}, {"name": "b", "lambda": OTHER}]})
    with pytest.raises(NotFound):
        client.get_chain(chain.id, lambda_name=MINE)  # spans two lambdas: only the all-lambdas route has it
    assert client.get_chain(chain.id).id == chain.id


def _state(client: AtfClient, path: str) -> Any:
    """What the thing a path names looks like now (a task, schedule or chain of MINE), to show it unchanged."""
    parts = path.split("?")[0].split("/")
    if len(parts) < 6:
        return None
    kind, ident = parts[4], parts[5]
    if kind == "tasks" and ident not in ("batch", "bulk"):
        return client.get(ident).model_dump()
    if kind == "schedules":
        found = [s for s in client.schedules() if s.name == ident]
        return found[0].model_dump() if found else None
    if kind == "chains":
        return client.get_chain(ident).model_dump()
    return None
