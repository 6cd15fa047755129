"""Each service's clients go where the environment's stack serves it (botocore's AWS_ENDPOINT_URL_<SERVICE>),
and the stack's first server tells SQS requests from the rest the way moto's dispatcher does."""

from __future__ import annotations

import pytest

from atf_core.aws import ENDPOINT_ENV, make_clients, service_endpoint
from atf_local.servers import remember_backends, service_of

STACK = "http://127.0.0.1:4566"
SQS = "http://127.0.0.1:4567"


@pytest.fixture
def stack_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENDPOINT_ENV, STACK)
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", SQS)


@pytest.mark.usefixtures("stack_env")
def test_a_component_of_the_stack_calls_sqs_on_its_own_server() -> None:
    assert service_endpoint("sqs") == SQS and service_endpoint("sqs", STACK) == SQS
    assert service_endpoint("dynamodb") == STACK
    clients = make_clients()
    assert clients.sqs.meta.endpoint_url == SQS and clients.sqs_long_poll.meta.endpoint_url == SQS
    assert clients.dynamodb.meta.endpoint_url == STACK and clients.dynamodb_heartbeat.meta.endpoint_url == STACK


@pytest.mark.usefixtures("stack_env")
def test_an_explicit_endpoint_of_another_stack_keeps_all_its_calls() -> None:
    other = "http://127.0.0.1:5000"
    clients = make_clients(other)
    assert clients.sqs.meta.endpoint_url == other and clients.dynamodb.meta.endpoint_url == other


def test_without_endpoints_botocore_resolves_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (ENDPOINT_ENV, "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    assert service_endpoint("sqs") is None
    assert make_clients(region="eu-west-1").sqs.meta.endpoint_url == "https://sqs.eu-west-1.amazonaws.com"


def test_the_per_service_variable_alone_points_that_service(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENDPOINT_ENV, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", SQS)
    assert service_endpoint("sqs") == SQS and service_endpoint("dynamodb") is None


def _signed(service: str) -> dict[str, str]:
    scope = f"AKIA/20261123/us-east-1/{service}/aws4_request"
    return {"HTTP_AUTHORIZATION": f"AWS4-HMAC-SHA256 Credential={scope}, SignedHeaders=host, Signature=x"}


def test_requests_are_told_apart_by_the_service_they_are_signed_for() -> None:
    assert service_of(_signed("sqs")) == "sqs"
    assert service_of(_signed("dynamodb")) == "dynamodb"
    assert service_of({"HTTP_X_AMZ_TARGET": "AmazonSQS.SendMessage"}) == "sqs"
    assert service_of({"HTTP_X_AMZ_TARGET": "DynamoDB_20120810.GetItem"}) is None
    assert service_of({}) is None


def test_the_dispatcher_finds_a_hosts_service_once_and_as_moto_does(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given moto's dispatcher, asked once per host without the memory, and with it
    from moto import backends
    from moto.moto_server import werkzeug_app

    hosts = ["sqs.us-east-1.amazonaws.com", "dynamodb.eu-west-1.amazonaws.com", "sts.amazonaws.com", "iam", "nowhere"]
    plain = werkzeug_app.DomainDispatcherApplication(werkzeug_app.create_backend_app)
    expected = {host: plain.get_backend_for_host(host) for host in hosts}
    remembered = werkzeug_app.DomainDispatcherApplication(werkzeug_app.create_backend_app)
    remember_backends(remembered)
    listings = []
    listing = backends.list_of_moto_modules
    monkeypatch.setattr(backends, "list_of_moto_modules", lambda: listings.append(1) or listing())
    # When each host is asked for three times
    answers = {host: [remembered.get_backend_for_host(host) for _ in range(3)] for host in hosts}
    # Then the answers are moto's, and moto's package was listed once per host, not per request
    assert answers == {host: [expected[host]] * 3 for host in hosts}
    assert expected["sqs.us-east-1.amazonaws.com"] == "sqs"
    assert expected["dynamodb.eu-west-1.amazonaws.com"] == "dynamodb"
    assert len(listings) == len(hosts)
