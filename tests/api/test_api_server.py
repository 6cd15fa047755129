"""The local HTTP front of the handler: API Gateway's proxy event in, its response out."""

from __future__ import annotations

import base64

from atf_local.api_server import from_result, to_event


def test_a_request_becomes_a_rest_proxy_event() -> None:
    headers = [("Host", "127.0.0.1:8080"), ("Content-Type", "application/json"), ("X-Tag", "a"), ("X-Tag", "b")]
    event = to_event("PUT", "/v1/gates/work/mail%3Avip?dry=1&dry=2", headers, b'{"action": "pause"}', "127.0.0.1")
    assert (event["httpMethod"], event["path"], event["body"], event["isBase64Encoded"]) == (
        "PUT",
        "/v1/gates/work/mail:vip",
        '{"action": "pause"}',
        False,
    )
    assert event["headers"]["X-Tag"] == "b" and event["multiValueHeaders"]["X-Tag"] == ["a", "b"]
    assert event["queryStringParameters"] == {"dry": "2"}
    assert event["multiValueQueryStringParameters"] == {"dry": ["1", "2"]}
    assert event["requestContext"]["path"] == "/local/v1/gates/work/mail:vip"
    assert event["requestContext"]["identity"]["sourceIp"] == "127.0.0.1"


def test_a_body_that_is_not_utf8_is_passed_base64_encoded() -> None:
    event = to_event("POST", "/v1/tasks", [], b"\xff\xfe", "127.0.0.1")
    assert event["isBase64Encoded"] and base64.b64decode(event["body"]) == b"\xff\xfe"
    assert to_event("GET", "/v1/gates", [], b"", "127.0.0.1")["body"] is None


def test_a_handler_result_becomes_status_headers_and_body() -> None:
    status, headers, body = from_result(
        {"statusCode": 201, "multiValueHeaders": {"Content-Type": ["application/json"]}, "body": "{}"}
    )
    assert (status, headers, body) == (201, [("Content-Type", "application/json")], b"{}")
    encoded = {"statusCode": 200, "headers": {}, "body": base64.b64encode(b"\x00").decode(), "isBase64Encoded": True}
    assert from_result(encoded)[2] == b"\x00"
