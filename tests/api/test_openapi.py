"""The OpenAPI document: generated from the routes, committed, and served; drift fails here."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openapi_spec_validator import validate

from atf_local.stack import LocalStack
from atf_sdk.client import AtfClient
from functions.frontend.handler import app
from functions.frontend.openapi_doc import TAGS
from functions.frontend.openapi_file import COMMITTED, render

REGENERATE = "the API changed: run `.venv/bin/python -m functions.frontend.openapi_file` and commit openapi.json"


ONE_LAMBDA = [
    ("POST", "/tasks"),
    ("POST", "/tasks/batch"),
    ("GET", "/tasks/{task_id}"),
    ("DELETE", "/tasks/{task_id}"),
    ("POST", "/tasks/{task_id}/change"),
    ("POST", "/tasks/bulk/cancel"),
    ("POST", "/tasks/bulk/reschedule"),
    ("POST", "/tasks/bulk/reprioritise"),
    ("PUT", "/gates"),
    ("DELETE", "/gates"),
    ("PUT", "/gates/{collection}"),
    ("DELETE", "/gates/{collection}"),
    ("GET", "/schedules"),
    ("PUT", "/schedules/{name}"),
    ("GET", "/schedules/{name}"),
    ("DELETE", "/schedules/{name}"),
    ("POST", "/schedules/{name}/pause"),
    ("POST", "/schedules/{name}/resume"),
    ("POST", "/chains"),
    ("GET", "/chains/{chain_id}"),
    ("DELETE", "/chains/{chain_id}"),
    ("POST", "/chains/{chain_id}/links/{link}/retry"),
]


def test_the_committed_document_matches_the_routes() -> None:
    assert COMMITTED.read_text() == render(app), REGENERATE


def test_the_api_serves_the_committed_document(client: AtfClient) -> None:
    assert client.openapi() == json.loads(COMMITTED.read_text())


def test_the_document_lists_every_endpoint_of_the_issues(stack: LocalStack) -> None:
    document = json.loads(COMMITTED.read_text())
    operations = {(method.upper(), path) for path, ops in document["paths"].items() for method in ops}
    assert operations == {
        ("POST", "/v1/tasks"),
        ("POST", "/v1/tasks/batch"),
        ("GET", "/v1/tasks/{task_id}"),
        ("DELETE", "/v1/tasks/{task_id}"),
        ("POST", "/v1/tasks/{task_id}/change"),
        ("POST", "/v1/tasks/bulk/cancel"),
        ("POST", "/v1/tasks/bulk/reschedule"),
        ("POST", "/v1/tasks/bulk/reprioritise"),
        ("GET", "/v1/gates"),
        ("PUT", "/v1/gates/{lambda_name}"),
        ("DELETE", "/v1/gates/{lambda_name}"),
        ("PUT", "/v1/gates/{lambda_name}/{collection}"),
        ("DELETE", "/v1/gates/{lambda_name}/{collection}"),
        ("GET", "/v1/lambdas/{lambda_name}/stats"),
        ("GET", "/v1/lambdas/{lambda_name}/dead-letters"),
        ("POST", "/v1/lambdas/{lambda_name}/dead-letters/redrive"),
        ("POST", "/v1/lambdas/{lambda_name}/dead-letters/discard"),
        ("GET", "/v1/schedules"),
        ("PUT", "/v1/schedules/{name}"),
        ("GET", "/v1/schedules/{name}"),
        ("DELETE", "/v1/schedules/{name}"),
        ("POST", "/v1/schedules/{name}/pause"),
        ("POST", "/v1/schedules/{name}/resume"),
        ("POST", "/v1/chains"),
        ("GET", "/v1/chains/{chain_id}"),
        ("DELETE", "/v1/chains/{chain_id}"),
        ("POST", "/v1/chains/{chain_id}/links/{link}/retry"),
        # One lambda's routes (issue 19): IAM can grant them per lambda.
        *((method, f"/v1/lambdas/{{lambda_name}}{path}") for method, path in ONE_LAMBDA),
    }
    assert document["security"] == [{"sigv4": []}]
    for ops in document["paths"].values():
        for operation in ops.values():
            assert "422" not in operation["responses"], "validation failures are 400s"
            assert operation["x-atf-permission"]["kind"] in ("use", "operate")


def _committed() -> dict[str, Any]:
    return json.loads(COMMITTED.read_text())  # type: ignore[no-any-return]


def _operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(path, method, op) for path, ops in document["paths"].items() for method, op in ops.items()]


def test_the_document_is_valid_openapi() -> None:
    # Every $ref resolves (Powertools' own validation-error schemas are left out with what refers to them).
    validate(_committed())


def test_a_dangling_reference_is_caught() -> None:
    document = _committed()
    document["components"]["schemas"]["Task"]["properties"]["error"] = {"$ref": "#/components/schemas/Missing"}
    with pytest.raises(Exception, match="Missing"):
        validate(document)


def test_every_operation_declares_what_api_gateway_answers_before_the_function() -> None:
    document = _committed()
    responses = document["components"]["responses"]
    for path, method, operation in _operations(document):
        declared = operation["responses"]
        expected = {"403", "429", "5XX"} | ({"413"} if "requestBody" in operation else set())
        assert expected <= set(declared), (method, path)
        for code in expected:
            (name,) = [ref.rsplit("/", 1)[-1] for ref in declared[code].values()]
            schema = responses[name]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path, code)
    assert "execute-api:Invoke" in responses["Gateway403"]["description"]


def test_every_operation_that_may_take_a_body_declares_the_refused_media_type() -> None:
    """The frontend refuses a body not declared as JSON on every POST and PUT, a route of no body included."""
    for path, method, operation in _operations(_committed()):
        if method in ("post", "put", "patch"):
            assert "415" in operation["responses"], (method, path)


def test_every_operation_has_one_declared_tag_and_every_tag_is_used() -> None:
    document = _committed()
    declared = [tag["name"] for tag in document["tags"]]
    assert declared == [name for name, _ in TAGS.values()]
    used = set()
    for path, method, operation in _operations(document):
        (tag,) = operation["tags"]
        assert tag in declared, (method, path)
        used.add(tag)
    assert used == set(declared)
    assert {op["tags"][0] for path, _, op in _operations(document) if "dead-letters" in path} == {"dead-letters"}
