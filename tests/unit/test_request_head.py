"""The embedded AWS's servers read a request's head as http.server does, whatever the head holds.

Each head is parsed twice, by http.server's own BaseHTTPRequestHandler.parse_request and by
atf_local.request_head.parse_request, on handlers alike in all else; both must leave the same command,
path, version, headers, keep-alive decision, error answer and unread body.
"""

from __future__ import annotations

import io
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atf_local import request_head

BOTOCORE = (
    b"POST / HTTP/1.1\r\nHost: 127.0.0.1:4566\r\nAccept-Encoding: identity\r\n"
    b"X-Amz-Target: DynamoDB_20120810.Query\r\nContent-Type: application/x-amz-json-1.0\r\n"
    b"User-Agent: Boto3/1.44.5 md/Botocore#1.44.5 ua/2.1 os/linux#6.1 lang/python#3.11.7 cfg/retry-mode#standard\r\n"
    b"X-Amz-Date: 20261126T153000Z\r\nX-Amz-Security-Token: IQoJb3JpZ2luX2VjEJr//////////wEa==\r\n"
    b"Authorization: AWS4-HMAC-SHA256 Credential=ASIA/20261126/us-east-1/dynamodb/aws4_request, "
    b"SignedHeaders=content-type;host;x-amz-date, Signature=abcdef\r\n"
    b"amz-sdk-invocation-id: 1a2b3c4d\r\namz-sdk-request: attempt=1; max=3\r\nContent-Length: 2\r\n\r\n{}"
)
HEADS = {
    "botocore's call": BOTOCORE,
    "HTTP/1.0": b"GET /x HTTP/1.0\r\nHost: h\r\n\r\n",
    "HTTP/1.0 keep-alive": b"GET /x HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
    "close": b"POST / HTTP/1.1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
    "expects 100-continue": b"PUT /k HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
    "expects on HTTP/1.0": b"PUT /k HTTP/1.0\r\nExpect: 100-continue\r\n\r\n",
    "a header twice": b"GET / HTTP/1.1\r\nX-A: 1\r\nx-a: 2\r\n\r\n",
    "colons and spaces in values": b"GET / HTTP/1.1\r\nX-A:  a: b  \r\nX-B:\t\tc\r\nX-C:\r\n\r\n",
    "LF line ends": b"GET / HTTP/1.1\nX-A: 1\nX-B: 2\n\nrest",
    "a folded value": b"GET / HTTP/1.1\r\nX-A: one\r\n two\r\nX-B: 3\r\n\r\n",
    "a line that is no field": b"GET / HTTP/1.1\r\nX-A: 1\r\nno field here\r\nX-B: 2\r\n\r\n",
    "a name with a space": b"GET / HTTP/1.1\r\nX A: 1\r\nX-B: 2\r\n\r\n",
    "an empty name": b"GET / HTTP/1.1\r\n: 1\r\nX-B: 2\r\n\r\n",
    "an mbox From line": b"GET / HTTP/1.1\r\nFrom me: 1\r\nX-B: 2\r\n\r\n",
    "a lone carriage return": b"GET / HTTP/1.1\r\nX-A: a\rb\r\nX-B: 2\r\n\r\n",
    "a carriage return before the end": b"GET / HTTP/1.1\r\nX-A: a\r\r\nX-B: 2\r\n\r\n",
    "a first line folded": b"GET / HTTP/1.1\r\n X-A: 1\r\nX-B: 2\r\n\r\n",
    "latin-1 bytes": b"GET / HTTP/1.1\r\nX-A: caf\xe9\r\n\r\n",
    "no blank line before the end": b"GET / HTTP/1.1\r\nX-A: 1\r\n",
    "no headers": b"GET / HTTP/1.1\r\n\r\n",
    "too many headers": b"GET / HTTP/1.1\r\n" + b"X-A: 1\r\n" * 100 + b"\r\n",
    "as many headers as allowed": b"GET / HTTP/1.1\r\n" + b"X-A: 1\r\n" * 99 + b"\r\n",
    "a line too long": b"GET / HTTP/1.1\r\nX-A: " + b"a" * 70_000 + b"\r\n\r\n",
    "a path of two slashes": b"GET //evil/x HTTP/1.1\r\nHost: h\r\n\r\n",
    "HTTP/2.0": b"GET / HTTP/2.0\r\n\r\n",
    "a bad version": b"GET / HTTP/1.x\r\n\r\n",
    "HTTP/0.9": b"GET /\r\n\r\n",
    "too many words": b"GET / x HTTP/1.1\r\n\r\n",
}


class Handler(BaseHTTPRequestHandler):
    """A handler with a request's bytes and no socket; records what it would have sent."""

    protocol_version = "HTTP/1.1"  # werkzeug's threaded servers, as the embedded AWS's

    def __init__(self, raw: bytes) -> None:  # no socket: BaseRequestHandler's __init__ would serve one
        self.rfile = io.BytesIO(raw)
        self.raw_requestline = self.rfile.readline(65537)
        self.sent: list[Any] = []

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        self.sent.append(("error", code, message, explain))
        self.close_connection = True

    def handle_expect_100(self) -> bool:
        self.sent.append("100-continue")
        return True


def outcome(handler: Handler, parsed: bool) -> dict[str, Any]:
    headers = getattr(handler, "headers", None)
    return {
        "parsed": parsed,
        "request": [getattr(handler, name, None) for name in ("command", "path", "request_version", "requestline")],
        "close_connection": handler.close_connection,
        "headers": list(headers.items()) if headers is not None else None,
        "sent": handler.sent,
        "unread": handler.rfile.read(),
    }


def both(raw: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    standard, ours = Handler(raw), Handler(raw)
    expected = outcome(standard, BaseHTTPRequestHandler.parse_request(standard))
    got = outcome(ours, request_head.parse_request(ours, lambda: BaseHTTPRequestHandler.parse_request(ours)))
    return expected, got


@pytest.mark.parametrize("raw", HEADS.values(), ids=HEADS.keys())
def test_a_head_is_read_as_http_server_reads_it(raw: bytes) -> None:
    expected, got = both(raw)
    assert got == expected


def test_the_plain_lines_are_taken_without_the_email_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the email parser made unusable
    def refused(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the email parser was asked")

    monkeypatch.setattr(request_head.email.parser.Parser, "parsestr", refused)
    # Then botocore's call is still read whole
    handler = Handler(BOTOCORE)
    assert request_head.parse_request(handler, lambda: False)
    assert handler.headers["X-Amz-Target"] == "DynamoDB_20120810.Query" and handler.rfile.read() == b"{}"


FIELD = st.text(alphabet="aZ-_:; \t\r\x7f\xe9", min_size=0, max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(FIELD, max_size=6), st.sampled_from([b"\r\n", b"\n"]))
def test_any_header_lines_are_read_as_http_server_reads_them(lines: list[str], end: bytes) -> None:
    raw = b"POST / HTTP/1.1" + end + b"".join(line.encode("latin-1") + end for line in lines) + end + b"body"
    expected, got = both(raw)
    assert got == expected
