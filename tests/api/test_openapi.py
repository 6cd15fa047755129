"""The OpenAPI document: generated from the routes, committed, and served; drift fails here."""

from __future__ import annotations

import json

from atf_local.stack import LocalStack
from atf_sdk.client import AtfClient
from functions.frontend.handler import app
from functions.frontend.openapi_doc import COMMITTED, render

REGENERATE = "the API changed: run `.venv/bin/python -m functions.frontend.openapi_doc` and commit openapi.json"


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
    }
    assert document["security"] == [{"sigv4": []}]
    for ops in document["paths"].values():
        for operation in ops.values():
            assert "422" not in operation["responses"], "validation failures are 400s"
