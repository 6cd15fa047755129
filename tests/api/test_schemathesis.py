"""Schemathesis against the running local API: generated valid and invalid requests to every
operation of the committed OpenAPI document, with zero server errors and answers that match it."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
import schemathesis
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from atf_local.stack import LocalStack
from functions.frontend.openapi_file import COMMITTED
from tests.api.conftest import DUMMY

EXAMPLES_PER_OPERATION = 30

SCHEMA = schemathesis.openapi.from_dict(json.loads(COMMITTED.read_text()))
SCHEMA.config.generation.update(deterministic=True)
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]
MODES = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)


class SigV4(requests.auth.AuthBase):
    """Signs each generated request the way the SDK does, so it passes the API's auth check."""

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        signable = AWSRequest(method=request.method, url=request.url, data=request.body, headers=dict(request.headers))
        SigV4Auth(DUMMY, "execute-api", "us-east-1").add_auth(signable)
        request.headers.update(dict(signable.headers.items()))
        return request


# One item per operation, parametrized by its label. schemathesis's own parametrize gives every operation's
# item the same node id on pytest 9, and pytest-xdist, which schedules items by node id, would run one of them.
@pytest.mark.parametrize("operation", OPERATIONS, ids=[operation.label for operation in OPERATIONS])
def test_the_api_never_fails_on_generated_requests(operation: Any, stack: LocalStack) -> None:
    session = requests.Session()
    session.auth = SigV4()

    @given(case=st.one_of(*(operation.as_strategy(mode) for mode in MODES)))
    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    def call(case: Any) -> None:
        case.call_and_validate(
            base_url=stack.api_url,
            session=session,
            checks=[not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance],
        )

    call()
