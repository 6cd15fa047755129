"""The frontend Lambda's very handler, served over HTTP on loopback as API Gateway would call it.

Each request becomes an API Gateway REST proxy event; the handler's answer
becomes the HTTP response. Calls go through one lock because a Lambda
container serves one request at a time and the Powertools resolver keeps the
current event in module state.

Auth, as API Gateway's AWS_IAM (atf_local.gateway_auth): the signature is
verified against the credentials the embedded AWS knows (its IAM users' keys,
its STS sessions), and the caller's policies must allow execute-api:Invoke on
the request's ARN; a refusal answers 403 as API Gateway does and never reaches
the handler. The event's requestContext.identity names the caller as API
Gateway's does (userArn, caller, accessKey, accountId).

Routes and bodies, as API Gateway checks them (atf_local.gateway_checks): a method and path that is not
one of the API's routes is refused 403 before anything else, and a JSON body that is not a JSON object
400, once the caller is authorized.

Sizes, as on AWS: a body over API Gateway's 10 MB is refused unread, and a
request whose event is over what Lambda may be invoked with (6 MiB) is refused
before the handler, both 413 `payload_too_large`.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import sys
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any, cast
from urllib.parse import parse_qsl, unquote, urlsplit

import boto3

from atf_core.api import MAX_EVENT_BYTES
from atf_core.aws import make_clients
from atf_local.background import BackgroundServer, LocalHTTPServer
from atf_local.consumer_process import FakeLambdaContext
from atf_local.environment import REPO
from atf_local.gateway_auth import API_ID, STAGE, KeyLookup, Refusal, authenticate, authorize
from atf_local.gateway_checks import invalid_body, unknown_route
from atf_local.iam.principals import Principal, principal_for_key
from atf_local.iam.roles import ACCOUNT

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
MAX_BODY_BYTES = 10 * 1024 * 1024  # API Gateway's payload limit
logger = logging.getLogger(__name__)


def to_event(
    method: str,
    target: str,
    headers: list[tuple[str, str]],
    body: bytes,
    client_ip: str,
    caller: Principal | None = None,
) -> dict[str, Any]:
    """An API Gateway REST API proxy event (payload format 1.0) for one HTTP request by `caller`."""
    url = urlsplit(target)
    path = unquote(url.path) or "/"
    query = parse_qsl(url.query, keep_blank_values=True)
    multi_headers: dict[str, list[str]] = {}
    for name, value in headers:
        multi_headers.setdefault(name, []).append(value)
    multi_query: dict[str, list[str]] = {}
    for name, value in query:
        multi_query.setdefault(name, []).append(value)
    text, encoded = _body_text(body)
    return {
        "resource": "/{proxy+}",
        "path": path,
        "httpMethod": method,
        "headers": {k: v[-1] for k, v in multi_headers.items()} or None,
        "multiValueHeaders": multi_headers or None,
        "queryStringParameters": {k: v[-1] for k, v in multi_query.items()} or None,
        "multiValueQueryStringParameters": multi_query or None,
        "pathParameters": {"proxy": path.lstrip("/")},
        "stageVariables": None,
        "requestContext": _request_context(method, path, client_ip, dict(headers), _identity(caller)),
        "body": text,
        "isBase64Encoded": encoded,
    }


def _body_text(body: bytes) -> tuple[str | None, bool]:
    if not body:
        return None, False
    try:
        return body.decode("utf-8"), False
    except UnicodeDecodeError:
        return base64.b64encode(body).decode("ascii"), True


def _identity(caller: Principal | None) -> dict[str, Any]:
    """What API Gateway's IAM authorization tells the function about the caller."""
    if caller is None:
        return {}
    named = {"caller": caller.caller, "user": caller.caller, "userArn": caller.arn}
    return {"accountId": ACCOUNT, "accessKey": caller.access_key_id, **named}


def _request_context(
    method: str, path: str, client_ip: str, headers: dict[str, str], identity: dict[str, Any]
) -> dict[str, Any]:
    return {
        "resourcePath": "/{proxy+}",
        "httpMethod": method,
        "path": f"/{STAGE}{path}",
        "stage": STAGE,
        "requestId": str(uuid.uuid4()),
        "requestTimeEpoch": int(time.time() * 1000),
        "accountId": ACCOUNT,
        "apiId": API_ID,
        "protocol": "HTTP/1.1",
        "domainName": headers.get("Host", "127.0.0.1"),
        "identity": {"sourceIp": client_ip, "userAgent": headers.get("User-Agent"), **identity},
    }


def from_result(result: dict[str, Any]) -> tuple[int, list[tuple[str, str]], bytes]:
    """Status, headers and body of the HTTP response a handler's result stands for."""
    headers: list[tuple[str, str]] = [(k, str(v)) for k, v in (result.get("headers") or {}).items()]
    for name, values in (result.get("multiValueHeaders") or {}).items():
        headers += [(name, str(v)) for v in values if (name, str(v)) not in headers]
    raw = result.get("body") or ""
    body = base64.b64decode(raw) if result.get("isBase64Encoded") else str(raw).encode()
    return int(result["statusCode"]), headers, body


# What API Gateway answers when the function failed, its answer included (its integration failed)
_BAD_GATEWAY = 502, [("Content-Type", "application/json")], b'{"message": "Internal server error"}'


def _event_bytes(event: dict[str, Any]) -> int:
    """The bytes of a Lambda event or response, as the runtime writes it."""
    return len(json.dumps(event, separators=(",", ":")).encode())


def _refusal(status: int, code: str, message: str, field: str | None) -> tuple[int, list[tuple[str, str]], bytes]:
    body = json.dumps({"code": code, "message": message, "field": field}).encode()
    return status, [("Content-Type", "application/json")], body


class _RequestHandler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def __getattr__(self, name: str) -> Any:
        # Every method reaches the dispatcher (do_GET, do_TRACE, ...): one no route has is refused there.
        if name.startswith("do_"):
            return self._dispatch
        raise AttributeError(name)

    def _dispatch(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            self._send(*_refusal(413, "payload_too_large", f"the body exceeds {MAX_BODY_BYTES} bytes", None))
            return
        body = self.rfile.read(length) if length else b""
        if self._refused(unknown_route(self.command, urlsplit(self.path).path)):
            return
        caller = self._authorized(body)
        if caller is None or self._refused(invalid_body(self.command, self.headers, body)):
            return
        event = to_event(self.command, self.path, list(self.headers.items()), body, self.client_address[0], caller)
        if _event_bytes(event) > MAX_EVENT_BYTES:
            # Lambda would refuse to be invoked with it, however far below API Gateway's limit the body is
            message = f"the request is over the {MAX_EVENT_BYTES} bytes a Lambda function's event may take"
            self._send(*_refusal(413, "payload_too_large", message, "body"))
            return
        try:
            answer = self.server.invoke(event)
        except Exception:
            logger.exception("the frontend handler failed")
            self._send(*_BAD_GATEWAY)
            return
        if _event_bytes(answer) > MAX_EVENT_BYTES:
            # Lambda fails an invocation whose response is over its limit, and API Gateway answers 502
            logger.error("Lambda would fail this answer: its response is over %d bytes", MAX_EVENT_BYTES)
            self._send(*_BAD_GATEWAY)
            return
        self._send(*from_result(answer))

    def _authorized(self, body: bytes) -> Principal | None:
        """The caller, where API Gateway would let the request through; else None, refused here."""
        caller = authenticate(self.command, self.path, self.headers, body, lookup=self.server.lookup)
        path = unquote(urlsplit(self.path).path)
        refused = caller if isinstance(caller, Refusal) else authorize(caller, self.command, path)
        return None if self._refused(refused) else cast(Principal, caller)

    def _refused(self, refusal: Refusal | None) -> bool:
        """Answer API Gateway's refusal, if there is one."""
        if refusal is None:
            return False
        logger.warning("API Gateway would refuse %s %s: %s", self.command, self.path, refusal.message)
        headers = [("Content-Type", "application/json"), ("x-amzn-ErrorType", refusal.error_type)]
        self._send(refusal.status, headers, json.dumps(refusal.body()).encode())
        return True

    def _send(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers:
            if name.lower() not in ("content-length", "connection"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the handler logs through Powertools


class _Server(LocalHTTPServer):
    def __init__(self, port: int, handler: Handler, lookup: KeyLookup) -> None:
        super().__init__(("127.0.0.1", port), _RequestHandler)
        self._handler = handler
        self.lookup = lookup
        self._lock = threading.Lock()

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            return self._handler(event, FakeLambdaContext(timeout_s=29.0, function_name="atf-frontend-local"))


def frontend_handler(session: boto3.Session | None = None) -> Handler:
    """The frontend's handler; with a `session`, its AWS clients are built from it: the role's credentials
    a Lambda function's process would have in its environment, which a thread of this one cannot have."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))  # functions/ is deployed as code, not installed as a package
    from functions.frontend import services
    from functions.frontend.handler import lambda_handler

    if session is not None:
        services.make_clients = functools.partial(make_clients, session=session)  # type: ignore[attr-defined]
        services._build.cache_clear()
    return lambda_handler


class ApiServer(BackgroundServer):
    """The frontend on http://127.0.0.1:<port>, in a daemon thread of this process; `lookup` finds who
    holds an access key: the embedded AWS's backends in this process by default (the local stack's), or
    `atf_local.iam.principals.lookup_at(endpoint)` in a process of its own."""

    def __init__(self, port: int = 8080, handler: Handler | None = None, lookup: KeyLookup | None = None) -> None:
        super().__init__(_Server(port, handler or frontend_handler(), lookup or principal_for_key), "atf-api")
