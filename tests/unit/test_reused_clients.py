"""The `aws` fixture hands its clients on to the next test only if the test left them as they were built
(tests/reused_clients.py): a handler registered and not removed, a method patched, a retry quota spent, or
another environment each gets the next test new clients."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from moto import mock_aws

from atf_core.aws import AwsClients
from tests.conftest import moto_clients
from tests.reused_clients import ReusedClients


@pytest.fixture
def pool() -> Iterator[ReusedClients]:
    with mock_aws():
        yield ReusedClients(moto_clients)


def _next(pool: ReusedClients, change: Callable[[AwsClients], object]) -> AwsClients:
    """The clients a test after one that made `change` gets."""
    clients = pool.take()
    change(clients)
    pool.give_back(clients)
    return pool.take()


def test_clients_left_alone_serve_the_next_test(pool: ReusedClients) -> None:
    first = pool.take()
    first.dynamodb.list_tables()
    first.sqs.list_queues()
    first.dynamodb.exceptions.ResourceNotFoundException  # noqa: B018 - built on first use
    pool.give_back(first)
    assert pool.take() is first and pool.built == 1


def test_a_handler_left_registered_gets_the_next_test_new_clients(pool: ReusedClients) -> None:
    def register(clients: AwsClients) -> None:
        clients.sqs_long_poll.meta.events.register("before-call.*.*", lambda **_: None)

    first = pool.take()
    pool.give_back(first)
    assert _next(pool, register) is not first

    # a handler removed before the test ends leaves them as they were
    def removed(clients: AwsClients) -> None:
        def handler(**_: Any) -> None:
            return None

        clients.dynamodb.meta.events.register_first("after-call.dynamodb.Query", handler)
        clients.dynamodb.meta.events.unregister("after-call.dynamodb.Query", handler)

    second = pool.take()
    pool.give_back(second)
    assert _next(pool, removed) is second


def test_a_patched_method_gets_the_next_test_new_clients(pool: ReusedClients, monkeypatch: pytest.MonkeyPatch) -> None:
    kept = pool.take()
    pool.give_back(kept)
    fresh = _next(pool, lambda c: monkeypatch.setattr(c.dynamodb, "query", lambda **_: {}))
    assert fresh is not kept
    pool.give_back(fresh)
    assert _next(pool, lambda c: monkeypatch.setattr(type(c.sqs), "send_message", lambda *_, **__: {})) is not fresh


def test_a_spent_retry_quota_gets_the_next_test_new_clients(pool: ReusedClients) -> None:
    def throttled(clients: AwsClients) -> None:
        def throttle(**_: Any) -> AWSResponse:
            return AWSResponse("", 400, {}, _Raw(b'{"__type": "ThrottlingException", "message": "slow down"}'))

        client = clients.dynamodb_heartbeat  # one retry: the quota spent, after a backoff of at most a second
        client.meta.events.register_first("before-send.dynamodb", throttle)
        with pytest.raises(client.exceptions.ClientError, match="ThrottlingException"):
            client.list_tables()
        client.meta.events.unregister("before-send.dynamodb", throttle)  # the handlers are as built

    first = pool.take()
    pool.give_back(first)
    assert _next(pool, throttled) is not first


def test_another_environment_gets_new_clients(pool: ReusedClients, monkeypatch: pytest.MonkeyPatch) -> None:
    first = pool.take()
    pool.give_back(first)
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:1")
    assert pool.take() is not first


class _Raw:
    """The raw stream of a botocore response whose body is `data`."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._data
