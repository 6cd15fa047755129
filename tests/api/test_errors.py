"""Every kind of bad input: a 4xx with the right code and field, never a 5xx, and nothing written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from atf_core.schema import MAX_PAYLOAD_BYTES

FAR = (datetime.now(UTC) + timedelta(days=400)).isoformat()
GOOD = {"lambda": "work", "payload": {"n": 1}}

# (name, method, path, body or raw bytes, content type, status, code, field)
CASES: list[tuple[str, str, str, Any, str | None, int, str, str | None]] = [
    ("malformed JSON", "POST", "/v1/tasks", b'{"lambda": "work",', "application/json", 400, "malformed_json", None),
    ("not an object", "POST", "/v1/tasks", [GOOD], "application/json", 400, "wrong_type", "body"),
    ("empty body", "POST", "/v1/tasks", None, "application/json", 400, "missing_field", "body"),
    ("missing lambda", "POST", "/v1/tasks", {"payload": {}}, "application/json", 400, "missing_field", "lambda"),
    (
        "unknown field",
        "POST",
        "/v1/tasks",
        {**GOOD, "colour": "red"},
        "application/json",
        400,
        "unknown_field",
        "colour",
    ),
    (
        "payload not an object",
        "POST",
        "/v1/tasks",
        {**GOOD, "payload": [1]},
        "application/json",
        400,
        "wrong_type",
        "payload",
    ),
    (
        "attempts a string",
        "POST",
        "/v1/tasks",
        {**GOOD, "max_attempts": "many"},
        "application/json",
        400,
        "wrong_type",
        "max_attempts",
    ),
    (
        "attempts too many",
        "POST",
        "/v1/tasks",
        {**GOOD, "max_attempts": 1000},
        "application/json",
        400,
        "invalid_input",
        "max_attempts",
    ),
    (
        "oversize payload",
        "POST",
        "/v1/tasks",
        {**GOOD, "payload": {"x": "a" * MAX_PAYLOAD_BYTES}},
        "application/json",
        400,
        "payload_too_large",
        "payload",
    ),
    (
        "impossible time",
        "POST",
        "/v1/tasks",
        {**GOOD, "run_at": "2026-02-30T10:00:00Z"},
        "application/json",
        400,
        "invalid_input",
        "run_at",
    ),
    (
        "time without zone",
        "POST",
        "/v1/tasks",
        {**GOOD, "run_at": "2026-01-01T10:00:00"},
        "application/json",
        400,
        "invalid_input",
        "run_at",
    ),
    (
        "far-future run_at",
        "POST",
        "/v1/tasks",
        {**GOOD, "run_at": FAR},
        "application/json",
        400,
        "invalid_input",
        "run_at",
    ),
    (
        "expires before it runs",
        "POST",
        "/v1/tasks",
        {**GOOD, "delay_seconds": 60, "expire_at": "2020-01-01T00:00:00Z"},
        "application/json",
        400,
        "invalid_input",
        "expire_at",
    ),
    (
        "expire_at out of range",
        "POST",
        "/v1/tasks",
        {**GOOD, "expire_at": "9999-12-31T23:00:00-05:00"},
        "application/json",
        400,
        "invalid_input",
        "expire_at",
    ),
    (
        "run_at out of range",
        "POST",
        "/v1/tasks",
        {**GOOD, "run_at": "0001-01-01T00:00:00+05:00"},
        "application/json",
        400,
        "invalid_input",
        "run_at",
    ),
    (
        "far-future delay",
        "POST",
        "/v1/tasks",
        {**GOOD, "delay_seconds": 400 * 86400},
        "application/json",
        400,
        "invalid_input",
        "delay_seconds",
    ),
    (
        "negative delay",
        "POST",
        "/v1/tasks",
        {**GOOD, "delay_seconds": -1},
        "application/json",
        400,
        "invalid_input",
        "delay_seconds",
    ),
    ("unknown lambda", "POST", "/v1/tasks", {"lambda": "nope"}, "application/json", 400, "unknown_lambda", "lambda"),
    ("bad lambda name", "POST", "/v1/tasks", {"lambda": "No Such"}, "application/json", 400, "invalid_input", "lambda"),
    (
        "unknown priority",
        "POST",
        "/v1/tasks",
        {**GOOD, "priority": "urgent"},
        "application/json",
        400,
        "unknown_priority",
        "priority",
    ),
    (
        "form content type",
        "POST",
        "/v1/tasks",
        GOOD,
        "application/x-www-form-urlencoded",
        415,
        "unsupported_media_type",
        "Content-Type",
    ),
    ("text content type", "POST", "/v1/tasks", GOOD, "text/plain", 415, "unsupported_media_type", "Content-Type"),
    ("no content type", "POST", "/v1/tasks", GOOD, None, 415, "unsupported_media_type", "Content-Type"),
    ("not UTF-8", "POST", "/v1/tasks", b'{"lambda": "\xff"}', "application/json", 400, "malformed_json", None),
    ("batch empty", "POST", "/v1/tasks/batch", {"tasks": []}, "application/json", 400, "invalid_input", "tasks"),
    (
        "batch over 100",
        "POST",
        "/v1/tasks/batch",
        {"tasks": [GOOD] * 101},
        "application/json",
        400,
        "invalid_input",
        "tasks",
    ),
    (
        "batch bad item",
        "POST",
        "/v1/tasks/batch",
        {"tasks": [GOOD, {**GOOD, "priority": "urgent"}]},
        "application/json",
        400,
        "unknown_priority",
        "tasks[1].priority",
    ),
    (
        "batch unknown field",
        "POST",
        "/v1/tasks/batch",
        {"tasks": [GOOD, GOOD, {**GOOD, "when": 1}]},
        "application/json",
        400,
        "unknown_field",
        "tasks[2].when",
    ),
    (
        "batch one key two bodies",
        "POST",
        "/v1/tasks/batch",
        {"tasks": [{**GOOD, "key": "k"}, {**GOOD, "key": "k", "payload": {"n": 2}}]},
        "application/json",
        409,
        "conflict",
        "tasks[1].key",
    ),
    ("malformed task id", "GET", "/v1/tasks/not-an-id", None, None, 400, "invalid_input", "id"),
    ("unknown task", "GET", "/v1/tasks/" + "0" * 32, None, None, 404, "not_found", "id"),
    ("cancel unknown task", "DELETE", "/v1/tasks/" + "0" * 32, None, None, 404, "not_found", "id"),
    ("unknown route", "GET", "/v1/nothing", None, None, 404, "not_found", "path"),
    (
        "gate unknown action",
        "PUT",
        "/v1/gates/work",
        {"action": "stop"},
        "application/json",
        400,
        "invalid_input",
        "action",
    ),
    (
        "gate unknown lambda",
        "PUT",
        "/v1/gates/nope",
        {"action": "pause"},
        "application/json",
        400,
        "unknown_lambda",
        "lambda",
    ),
    (
        "gate in the past",
        "PUT",
        "/v1/gates/work",
        {"action": "pause", "until": "2020-01-01T00:00:00Z"},
        "application/json",
        400,
        "invalid_input",
        "until",
    ),
    (
        "gate far future",
        "PUT",
        "/v1/gates/work",
        {"action": "pause", "until": FAR},
        "application/json",
        400,
        "invalid_input",
        "until",
    ),
    (
        "gate bad collection",
        "PUT",
        "/v1/gates/work/a%20b",
        {"action": "pause"},
        "application/json",
        400,
        "invalid_input",
        "collection",
    ),
    ("lift missing gate", "DELETE", "/v1/gates/work/none-here", None, None, 404, "not_found", "lambda"),
    ("stats unknown lambda", "GET", "/v1/lambdas/nope/stats", None, None, 400, "unknown_lambda", "lambda"),
]


@pytest.mark.parametrize(
    ("method", "path", "body", "content_type", "status", "code", "field"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_bad_input_is_refused_and_writes_nothing(
    raw: Any,
    item_count: Any,
    method: str,
    path: str,
    body: Any,
    content_type: str | None,
    status: int,
    code: str,
    field: str | None,
) -> None:
    before = item_count()
    data = body if isinstance(body, bytes) else None
    reply = raw(method, path, None if data else body, data=data, content_type=content_type)
    assert (reply.status, reply.body["code"], reply.body["field"]) == (status, code, field), reply.body
    assert reply.body["message"]
    if field and status == 400:
        assert field.split(".")[-1].split("[")[0] in reply.body["message"], "the message names the field"
    assert item_count() == before


def test_unsigned_requests_are_refused(raw: Any, item_count: Any) -> None:
    before = item_count()
    reply = raw("POST", "/v1/tasks", GOOD, sign=False)
    assert (reply.status, reply.body["code"]) == (403, "missing_authentication")
    assert item_count() == before


def test_a_valid_batch_after_a_refused_one_writes_every_task(raw: Any, item_count: Any) -> None:
    before = item_count()
    assert raw("POST", "/v1/tasks/batch", {"tasks": [GOOD, {"lambda": "nope"}]}).status == 400
    assert item_count() == before
    reply = raw("POST", "/v1/tasks/batch", {"tasks": [GOOD, GOOD]})
    assert [r["status"] for r in reply.body["results"]] == [201, 201]
    assert item_count() == before + 2
