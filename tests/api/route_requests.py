"""A valid request for any route of the API, for a given lambda: what a per-route test (who is allowed, who is
refused, what is written) sends. `prepare(route, lambda_name, client)` makes what the request needs first
(a task, a schedule, a chain, a gate: through `client`, a principal allowed everything) and returns the
request and the status an allowed caller gets. Routes come from atf_core.access.ROUTES, the one table.

    for found in ROUTES:
        request = prepare(found, "chore", operator_client)
        reply = raw(request.method, request.path, request.body)   # signed as whoever is under test
        assert reply.status == request.allowed_status
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from atf_core.access import SCOPED_PREFIX, Route
from atf_sdk import routes
from atf_sdk.client import AtfClient

LATER = 3600.0  # tasks made here wait an hour: nothing runs them meanwhile


@dataclass(frozen=True)
class Prepared:
    method: str
    path: str
    body: Any
    allowed_status: int


@dataclass(frozen=True)
class _Needs:
    """The path's values and the body of one request, made for a lambda."""

    values: dict[str, str]
    body: Any
    status: int = 200


def prepare(found: Route, lambda_name: str, client: AtfClient) -> Prepared:
    """The lambda must have a priority "normal" (the reprioritise request moves tasks there)."""
    needs = _BUILDERS[(found.method, _suffix(found))](lambda_name, client)
    values = {k: routes.segment(v) for k, v in {**needs.values, "lambda_name": lambda_name}.items()}
    return Prepared(found.method, found.build(**values), needs.body, needs.status)


def _suffix(found: Route) -> str:
    """The route's path after its lambda (or after /v1 for the all-lambdas routes): the key of its builder."""
    if found.scoped:
        return found.path.removeprefix(SCOPED_PREFIX)
    return found.path.removeprefix("/v1").replace("/gates/{lambda_name}", "/gates")


def _key() -> str:
    return uuid.uuid4().hex


def _task(lambda_name: str, client: AtfClient) -> dict[str, str]:
    return {"task_id": client.schedule(lambda_name, delay_seconds=LATER).id}


def _schedule(lambda_name: str, client: AtfClient, paused: bool = False) -> dict[str, str]:
    name = f"matrix-{_key()[:12]}"
    client.put_schedule(name, {"lambda": lambda_name, "every_seconds": LATER})
    if paused:
        client.pause_schedule(name)
    return {"name": name}


def _chain(lambda_name: str, client: AtfClient) -> dict[str, str]:
    view = client.create_chain({"links": [{"name": "one", "lambda": lambda_name}], "key": _key()})
    return {"chain_id": view.id, "link": "one"}


def _gate(lambda_name: str, client: AtfClient, collection: str | None) -> dict[str, str]:
    client.pause(lambda_name, collection, reason="route matrix")
    return {} if collection is None else {"collection": collection}


Builder = Callable[[str, AtfClient], _Needs]
_BUILDERS: dict[tuple[str, str], Builder] = {
    ("POST", "/tasks"): lambda n, c: _Needs({}, {"lambda": n, "key": _key(), "delay_seconds": LATER}, 201),
    ("POST", "/tasks/batch"): lambda n, c: _Needs({}, {"tasks": [{"lambda": n, "delay_seconds": LATER}]}),
    ("GET", "/tasks/{task_id}"): lambda n, c: _Needs(_task(n, c), None),
    ("DELETE", "/tasks/{task_id}"): lambda n, c: _Needs(_task(n, c), None),
    ("POST", "/tasks/{task_id}/change"): lambda n, c: _Needs(_task(n, c), {"delay_seconds": 2 * LATER}),
    ("POST", "/tasks/bulk/cancel"): lambda n, c: _Needs({}, {"lambda": n, "dry_run": True}),
    ("POST", "/tasks/bulk/reschedule"): lambda n, c: _Needs({}, {"lambda": n, "dry_run": True, "delay_seconds": 1}),
    ("POST", "/tasks/bulk/reprioritise"): lambda n, c: _Needs({}, {"lambda": n, "dry_run": True, "priority": "normal"}),
    ("GET", "/gates"): lambda n, c: _Needs({}, None),
    ("PUT", "/gates"): lambda n, c: _Needs({}, {"action": "pause", "reason": "route matrix"}),
    ("DELETE", "/gates"): lambda n, c: _Needs(_gate(n, c, None), None, 204),
    ("PUT", "/gates/{collection}"): lambda n, c: _Needs({"collection": "matrix"}, {"action": "pause"}),
    ("DELETE", "/gates/{collection}"): lambda n, c: _Needs(_gate(n, c, "matrix"), None, 204),
    ("GET", "/stats"): lambda n, c: _Needs({}, None),
    ("GET", "/dead-letters"): lambda n, c: _Needs({}, None),
    ("POST", "/dead-letters/redrive"): lambda n, c: _Needs({}, {"dry_run": True}),
    ("POST", "/dead-letters/discard"): lambda n, c: _Needs({}, {"dry_run": True}),
    ("GET", "/schedules"): lambda n, c: _Needs({}, None),
    ("PUT", "/schedules/{name}"): lambda n, c: _Needs({"name": f"m-{_key()}"}, {"lambda": n, "every_seconds": LATER}),
    ("GET", "/schedules/{name}"): lambda n, c: _Needs(_schedule(n, c), None),
    ("DELETE", "/schedules/{name}"): lambda n, c: _Needs(_schedule(n, c), None, 204),
    ("POST", "/schedules/{name}/pause"): lambda n, c: _Needs(_schedule(n, c), {}),
    ("POST", "/schedules/{name}/resume"): lambda n, c: _Needs(_schedule(n, c, paused=True), {}),
    ("POST", "/chains"): lambda n, c: _Needs({}, {"links": [{"name": "one", "lambda": n}], "key": _key()}, 201),
    ("GET", "/chains/{chain_id}"): lambda n, c: _Needs(_chain(n, c), None),
    ("DELETE", "/chains/{chain_id}"): lambda n, c: _Needs(_chain(n, c), None),
    # Only a dead-letter link can be retried: a fresh one answers 409, from the function (so IAM let it by).
    ("POST", "/chains/{chain_id}/links/{link}/retry"): lambda n, c: _Needs(_chain(n, c), {}, 409),
}
