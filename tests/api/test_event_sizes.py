"""A request is as large as AWS lets it be: its Lambda event within 6 MiB (atf_core.api.MAX_EVENT_BYTES).

API Gateway takes a body up to 10 MB, but the frontend is a Lambda function, and Lambda refuses to be
invoked with an event over 6 MiB, the body in it a JSON string whose quotes are escaped. The local API
refuses what AWS would, and `schedule_many` sends batches that fit.
"""

from __future__ import annotations

import json
from typing import Any

from atf_core.api import MAX_EVENT_BYTES, in_an_event
from atf_core.errors import PayloadTooLarge, from_wire
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
