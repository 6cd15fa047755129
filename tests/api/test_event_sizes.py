"""A request and an answer are as large as AWS lets them be: each within the 6 MiB of a Lambda event or
response (atf_core.api.MAX_EVENT_BYTES).

API Gateway takes a body up to 10 MB, but the frontend is a Lambda function, and Lambda refuses to be
invoked with an event over 6 MiB, the body in it a JSON string whose quotes are escaped; it fails an
invocation whose response is over it, which API Gateway answers with a 502. The local API does what AWS
would, and `schedule_many` sends batches that fit (the schedules' list answers in pages: test_schedule_pages).
"""

from __future__ import annotations

import json
from typing import Any

from atf_core.api import MAX_EVENT_BYTES, in_an_event
from atf_core.errors import PayloadTooLarge, from_wire
from atf_local.api_server import ApiServer
from atf_local.stack import LocalStack, free_port
from atf_sdk.client import AtfClient
from tests.api.conftest import Raw

# 100 tasks of ~70 KB: a 7 MB body, under API Gateway's 10 MB and over Lambda's 6 MiB
PLAIN = [{"lambda": "work", "payload": {"n": n, "x": "a" * 70_000}} for n in range(100)]
# 30 tasks of 60,000 quotes: a 3.6 MB body (escaped once) that its event escapes again to 7.2 MB
QUOTED = [{"lambda": "work", "payload": {"n": n, "x": '"' * 60_000}} for n in range(30)]


def test_a_body_over_what_a_lambda_event_holds_is_refused_and_nothing_written(raw: Raw, item_count: Any) -> None:
    for tasks in (PLAIN, QUOTED):
        body = json.dumps({"tasks": tasks})
        assert len(body) < 10 * 1024 * 1024 and in_an_event(body) > MAX_EVENT_BYTES  # the case, as stated
        before = item_count()

        reply = raw("POST", "/v1/tasks/batch", data=body.encode())

        assert (reply.status, reply.body["code"], reply.body["field"]) == (413, "payload_too_large", "body")
        assert item_count() == before


def test_schedule_many_sends_batches_whose_events_fit(client: AtfClient) -> None:
    for tasks in (PLAIN, QUOTED):
        results = client.schedule_many(tasks)

        assert [(item.index, item.status) for item in results] == [(n, 201) for n in range(len(tasks))]
        for item, task in zip(results, tasks, strict=True):
            assert item.task is not None
            assert client.get(item.task.id).payload["n"] == task["payload"]["n"]


def test_api_gateways_own_413_is_payload_too_large() -> None:
    # API Gateway answers an invocation Lambda refused for its size with a message alone
    error = from_wire(413, {"message": "Request Too Long"})
    assert (type(error), error.code, error.status) == (PayloadTooLarge, "payload_too_large", 413)


def test_an_answer_over_what_a_lambda_response_holds_is_a_502_as_api_gateway_answers_it(stack: LocalStack) -> None:
    # the body escaped once by the handler's JSON and again in the response: 3.6 MB of quotes is 7.2 MB there
    body = json.dumps({"x": '"' * 1_800_000})
    assert len(body) < MAX_EVENT_BYTES < in_an_event(body)

    def answer(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"statusCode": 200, "headers": {"Content-Type": "application/json"}, "body": body}

    server = ApiServer(free_port(), answer).start()
    try:
        reply = Raw(server.url)("GET", "/v1/gates")
    finally:
        server.stop()

    assert (reply.status, reply.body) == (502, {"message": "Internal server error"})
