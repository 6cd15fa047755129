"""The route table (atf_core.access) against IAM's wildcard rules, over every route of the OpenAPI document.

API Gateway authorizes a request as execute-api:Invoke on `.../{stage}/{METHOD}/{path}` before the function
validates anything, so a path parameter may hold any one segment: the requests below fill them with the
names of other routes' segments, the likeliest to be caught by a `*` (which in IAM spans "/").
"""

from __future__ import annotations

import itertools
import json
import re
from functools import cache

import pytest

from atf_core.access import KINDS, ROUTES, Kind, Route, grant_patterns, route
from functions.frontend.openapi_file import COMMITTED

LAMBDAS = ("a", "ab", "b", "tasks", "stats")
TRICKY = ("x", "tasks", "stats", "batch", "bulk", "change", "dead-letters", "gates", "schedules", "chains", "*")


def documented() -> list[Route]:
    paths = json.loads(COMMITTED.read_text())["paths"]
    return [route(method, path) for path, item in paths.items() for method in item]


def requests_of(found: Route) -> list[tuple[str | None, str]]:
    """(lambda, "METHOD/path") for a spread of values of the route's parameters."""
    others = [p for p in found.parameters if p != "lambda_name"]
    made = []
    for lambda_name in LAMBDAS if found.scoped else (None,):
        for values in itertools.product(TRICKY, repeat=len(others)):
            path = found.build(**dict(zip(others, values, strict=True)), lambda_name=lambda_name or "")
            made.append((lambda_name, f"{found.method}{path}"))
    return made


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    """IAM's matching of a resource: `*` any run of characters ("/" too), `?` one, the rest literal."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern))


def allows(patterns: list[tuple[str, str]], request: str) -> bool:
    return any(_compiled(f"{method}{path}").fullmatch(request) for method, path in patterns)


def test_every_documented_route_has_a_kind_and_the_table_holds_nothing_else() -> None:
    assert {(r.method, r.path) for r in documented()} == {(r.method, r.path) for r in ROUTES}


@pytest.mark.parametrize("kind", KINDS)
def test_a_grant_for_one_lambda_allows_exactly_that_lambdas_routes_of_its_kind(kind: Kind) -> None:
    patterns = grant_patterns(kind, ["a"], every_lambda=False)
    for found in documented():
        for lambda_name, request in requests_of(found):
            expected = ((found.scoped and lambda_name == "a") or found.spanning) and found.kind == kind
            assert allows(patterns, request) == expected, (kind, request)


def test_a_grant_of_no_lambda_allows_no_route_spanning_lambdas() -> None:
    for kind in KINDS:
        assert grant_patterns(kind, [], every_lambda=False) == []


@pytest.mark.parametrize("kind", KINDS)
def test_a_grant_of_either_kind_allows_the_api_document(kind: Kind) -> None:
    assert allows(grant_patterns(kind, ["a"], every_lambda=False), "GET/v1/openapi.json")
    assert allows(grant_patterns(kind, LAMBDAS, every_lambda=True), "GET/v1/openapi.json")


def test_a_spanning_route_is_checked_against_its_twin_for_one_lambda() -> None:
    spanning = [r for r in ROUTES if r.spanning]
    assert {(r.method, r.path) for r in spanning} == {("POST", "/v1/tasks/batch"), ("POST", "/v1/chains")}
    for found in spanning:
        twin = found.twin()
        assert twin.scoped and (twin.method, twin.kind) == (found.method, found.kind)
        assert twin.path.removeprefix("/v1/lambdas/{lambda_name}") == found.path.removeprefix("/v1")
    with pytest.raises(ValueError, match="does not span lambdas"):
        route("POST", "/v1/tasks").twin()


@pytest.mark.parametrize("kind", KINDS)
def test_a_grant_for_every_lambda_allows_every_route_of_its_kind_and_none_of_the_other(kind: Kind) -> None:
    patterns = grant_patterns(kind, LAMBDAS, every_lambda=True)
    for found in documented():
        for _, request in requests_of(found):
            assert allows(patterns, request) == (found.kind == kind), (kind, request)


def test_a_grant_writes_no_lambda_as_a_wildcard() -> None:
    for kind in KINDS:
        for _, path in grant_patterns(kind, ["a", "b"], every_lambda=True):
            assert not path.startswith("/v1/lambdas/*"), path


def test_the_matcher_follows_iam_wildcards() -> None:
    # The test is only as good as its matcher: `*` spans "/", `?` is one character, nothing else is special.
    assert allows([("GET", "/v1/lambdas/a/tasks/*")], "GET/v1/lambdas/a/tasks/x/change")
    assert not allows([("GET", "/v1/lambdas/a/tasks/*")], "GET/v1/lambdas/ab/tasks/x")
    assert allows([("GET", "/v1/lambdas/?/stats")], "GET/v1/lambdas/b/stats")
    assert not allows([("GET", "/v1/lambdas/a/stats")], "GET/v1/lambdas/a/stats/x")
    assert not allows([("GET", "/v1/lambdas/a.b")], "GET/v1/lambdas/axb")


def test_a_route_without_a_lambda_has_no_one_lambda_resource() -> None:
    with pytest.raises(ValueError, match="does not name a lambda"):
        route("GET", "/v1/tasks/{task_id}").resource_path("a")
    with pytest.raises(KeyError, match=r"not in atf_core\.access\.ROUTES"):
        route("GET", "/v1/nowhere")


def _sdk_paths() -> list[tuple[str, str, str | None]]:
    """(method, path, lambda it names) of each call of the SDK, with a lambda named and without."""
    from atf_sdk import routes

    made: list[tuple[str, str, str | None]] = []
    for name in ("a", None):
        made += [
            ("POST", routes.tasks(name), name),
            ("POST", routes.batch(name), name),
            ("GET", routes.task("0" * 32, name), name),
            ("DELETE", routes.task("0" * 32, name), name),
            ("POST", routes.task_change("0" * 32, name), name),
            *(("POST", routes.bulk(action, name), name) for action in ("cancel", "reschedule", "reprioritise")),
            ("GET", routes.schedules(name), name),
            *((verb, routes.schedule("s", None, name), name) for verb in ("PUT", "GET", "DELETE")),
            *(("POST", routes.schedule("s", action, name), name) for action in ("pause", "resume")),
            ("POST", routes.chains(name), name),
            *((verb, routes.chain("0" * 32, name), name) for verb in ("GET", "DELETE")),
            ("POST", routes.link_retry("0" * 32, "l", name), name),
        ]
    made += [(verb, routes.gate("a", c), "a") for verb in ("PUT", "DELETE") for c in (None, "c")]
    made += [("GET", routes.stats("a"), "a"), ("GET", routes.dead_letters("a"), "a")]
    made += [("POST", routes.dead_letters("a", action), "a") for action in ("redrive", "discard")]
    return made


@pytest.mark.parametrize(("method", "path", "lambda_name"), _sdk_paths())
def test_each_sdk_call_takes_the_route_of_the_lambda_it_names(method: str, path: str, lambda_name: str | None) -> None:
    templates = [r for r in ROUTES if r.method == method]
    (found,) = [r for r in templates if re.fullmatch(re.sub(r"\{[a-z_]+\}", "[^/]+", r.path), path)]
    assert found.scoped == (lambda_name is not None), path
    if lambda_name is not None:
        assert path.startswith(f"/v1/lambdas/{lambda_name}/")


def test_docs_api_lists_each_route_with_its_permission() -> None:
    text = (COMMITTED.parents[2] / "docs" / "api.md").read_text()
    row = r"^\| `([A-Z]+) (/v1/[^`]+)` \| (use|operate), (the lambda in the path|each item's lambda|every lambda) \|$"
    rows = re.findall(row, text, re.M)
    documented_rows = {(m, p): (k, who) for m, p, k, who in rows}
    assert documented_rows == {(r.method, r.path): (r.kind, _who(r)) for r in ROUTES}


def _who(found: Route) -> str:
    return "the lambda in the path" if found.scoped else "each item's lambda" if found.spanning else "every lambda"
