"""The SDK's transport against stand-in handlers: signing, retries with backoff, configuration."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from atf_core.errors import MissingAuthentication, Throttled, Unavailable
from atf_local.api_server import ApiServer
from atf_local.stack import LocalStack, free_port
from atf_sdk.cli import main
from atf_sdk.client import API_URL_ENV, AtfClient, RetryPolicy
from functions.frontend.handler import lambda_handler

Event = dict[str, Any]
FAST = RetryPolicy(attempts=3, base_s=0.01, cap_s=0.05)


@pytest.fixture
def serve(stack: LocalStack) -> Iterator[Callable[[Callable[[Event, Any], Event]], str]]:
    """Serve a stand-in handler (which may call the real one) on a free port; give its URL."""
    servers: list[ApiServer] = []

    def start(handler: Callable[[Event, Any], Event]) -> str:
        servers.append(ApiServer(free_port(), handler).start())
        return servers[-1].url

    yield start
    for server in servers:
        server.stop()


def _reply(status: int, body: Any, headers: dict[str, str] | None = None) -> Event:
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json", **(headers or {})},
        "body": json.dumps(body),
    }


def test_requests_are_signed_for_execute_api(serve: Any) -> None:
    seen: list[Event] = []

    def record(event: Event, context: Any) -> Event:
        seen.append(event)
        return lambda_handler(event, context)

    url = serve(record)
    AtfClient(url, region="us-east-1").schedule("work")
    authorization = seen[0]["headers"]["Authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=local/")
    assert "/us-east-1/execute-api/aws4_request" in authorization
    assert "X-Amz-Date" in seen[0]["headers"]
    # Signed for another region than the API's: refused as API Gateway refuses it, naming the region signed for
    with pytest.raises(MissingAuthentication, match="scoped to a valid region, not 'eu-west-1'"):
        AtfClient(url, region="eu-west-1").schedule("work")
    assert len(seen) == 1


def test_throttling_and_server_errors_are_retried_with_the_same_key(serve: Any) -> None:
    bodies: list[dict[str, Any]] = []

    def flaky(event: Event, context: Any) -> Event:
        bodies.append(json.loads(event["body"]))
        if len(bodies) == 1:
            return _reply(429, {"message": "Too Many Requests"}, {"Retry-After": "0"})
        if len(bodies) == 2:
            lambda_handler(event, context)  # written, but the answer is lost
            return _reply(502, {"message": "Internal server error"})
        return lambda_handler(event, context)

    task = AtfClient(serve(flaky), retry=FAST).schedule("work", {"order": 7})
    assert len(bodies) == 3 and bodies[0] == bodies[1] == bodies[2] and bodies[0]["key"]
    assert not task.created, "the retry found the task its lost answer had made"


def test_retries_give_up_with_the_last_error(serve: Any) -> None:
    calls: list[int] = []

    def throttled(event: Event, context: Any) -> Event:
        calls.append(1)
        return _reply(429, {"code": "throttled", "message": "slow down"})

    with pytest.raises(Throttled):
        AtfClient(serve(throttled), retry=FAST).get("a" * 32)
    assert len(calls) == FAST.attempts


def test_a_dead_endpoint_is_unavailable() -> None:
    with pytest.raises(Unavailable):
        AtfClient(f"http://127.0.0.1:{free_port()}", retry=FAST).gates()


def test_batch_items_the_store_throttled_are_resent_alone(serve: Any) -> None:
    sent: list[list[dict[str, Any]]] = []

    def throttle_second_item_once(event: Event, context: Any) -> Event:
        tasks = json.loads(event["body"])["tasks"]
        sent.append(tasks)
        reply = lambda_handler(event, context)
        if len(sent) == 1:  # pretend the store throttled item 1 and wrote nothing for it
            body = json.loads(reply["body"])
            body["results"][1] = {"index": 1, "status": 503, "error": {"code": "unavailable", "message": "retry"}}
            reply["body"] = json.dumps(body)
        return reply

    results = AtfClient(serve(throttle_second_item_once), retry=FAST).schedule_many(
        [{"lambda": "work", "payload": {"i": i}} for i in range(3)]
    )
    assert [len(batch) for batch in sent] == [3, 1] and sent[1][0] == sent[0][1]
    # The resend carries item 1's key, so it finds the task rather than making a second one.
    assert [(r.index, r.status) for r in results] == [(0, 201), (1, 200), (2, 201)]


def test_an_outage_after_the_checks_says_which_tasks_were_written_before_it(serve: Any) -> None:
    # Given an API that checks both batches, writes the first, then is unavailable
    written: list[int] = []

    def fail_the_second_write(event: Event, context: Any) -> Event:
        body = json.loads(event["body"])
        if not body.get("dry_run") and written:
            return _reply(503, {"code": "unavailable", "message": "down", "field": None})
        if not body.get("dry_run"):
            written.append(len(body["tasks"]))
        return lambda_handler(event, context)

    # When 150 tasks are scheduled
    with pytest.raises(Unavailable) as failed:
        AtfClient(serve(fail_the_second_write), retry=FAST).schedule_many(
            [{"lambda": "work", "delay_seconds": 600} for _ in range(150)]
        )
    # Then the error says the first batch's were scheduled
    assert written == [100] and failed.value.__notes__ == ["tasks[0] to tasks[99] were scheduled before it"]


def test_the_cli_prints_what_was_written_before_an_error(
    serve: Any, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    def fail_every_write_but_the_first(event: Event, context: Any) -> Event:
        body = json.loads(event["body"])
        if not body.get("dry_run") and body["tasks"][0]["payload"]["i"] > 0:
            return _reply(500, {"code": "internal", "message": "broken", "field": None})
        return lambda_handler(event, context)

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"lambda": "work", "payload": {"i": i}}) + "\n" for i in range(150)))
    with pytest.raises(SystemExit) as exited:
        main(["schedule", "--file", str(tasks), "--api-url", serve(fail_every_write_but_the_first)])
    err = capsys.readouterr().err
    assert exited.value.code == 1
    assert err.splitlines() == ["atf: internal: broken", "atf: tasks[0] to tasks[99] were scheduled before it"]


def test_from_env_reads_the_api_url(monkeypatch: pytest.MonkeyPatch, stack: LocalStack) -> None:
    monkeypatch.setenv(API_URL_ENV, stack.api_url + "/")
    client = AtfClient.from_env()
    assert client.endpoint == stack.api_url and client.gates() is not None


def test_the_region_comes_from_an_execute_api_url() -> None:
    client = AtfClient("https://abc123.execute-api.ap-south-1.amazonaws.com/prod")
    assert client.region == "ap-south-1"


DENIED = "is not authorized to perform: dynamodb:PutItem on resource: arn:aws:dynamodb:us-east-1:1:table/t"


@pytest.mark.parametrize(
    ("code", "message", "logged_as"),
    [
        ("AccessDeniedException", DENIED, "AWS refused a call: missing permission"),
        # what DynamoDB answers an item over 400 KB: a defect of the framework's, which no retry mends
        (
            "ValidationException",
            "Item size has exceeded the maximum allowed size",
            "AWS refused a call: an invalid request",
        ),
    ],
)
def test_a_call_aws_refuses_for_good_is_internal_logged_and_not_retried(
    serve: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    code: str,
    message: str,
    logged_as: str,
) -> None:
    from botocore.exceptions import ClientError

    from atf_core.errors import Internal
    from atf_core.tasks import Scheduling

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise ClientError({"Error": {"Code": code, "Message": message}}, "PutItem")

    monkeypatch.setattr(Scheduling, "schedule", refused)
    calls: list[int] = []

    def count(event: Event, context: Any) -> Event:
        calls.append(1)
        return lambda_handler(event, context)

    with pytest.raises(Internal) as raised:
        AtfClient(serve(count), retry=FAST).schedule("work")
    assert (raised.value.status, raised.value.code, len(calls)) == (500, "internal", 1)  # once: no retry mends it
    (logged,) = [r for r in caplog.records if r.getMessage() == logged_as]
    assert logged.levelname == "ERROR" and logged.operation == "PutItem" and message in logged.error  # type: ignore[attr-defined]


def test_a_500_without_the_frameworks_code_is_retried(serve: Any) -> None:
    calls: list[int] = []

    def crashed_once(event: Event, context: Any) -> Event:
        calls.append(1)
        if len(calls) == 1:
            return _reply(500, {"message": "Internal server error"})  # API Gateway's, say a function crash
        return lambda_handler(event, context)

    AtfClient(serve(crashed_once), retry=FAST).schedule("work")
    assert len(calls) == 2
