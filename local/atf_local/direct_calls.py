"""The embedded AWS's DynamoDB and SQS calls, handed to moto's own response classes without its Flask apps.

moto's server passes every request through a dispatcher that works out the service again (under one lock
all requests share), a Flask app per service (a request context, werkzeug's URL routing, CORS hooks, a
Response object) and moto's adapter from Flask to its response classes: about a quarter of a cheap call's
CPU in the servers (py-spy on a GetItem loop; tests/functional/test_direct_calls.py compares the answers).
A JSON-protocol call names its operation in X-Amz-Target and is always posted to "/", where moto's URL map
for DynamoDB and SQS has one handler: the response class's `dispatch`. So for those calls this app does
what moto's Flask app would: it builds moto's server request from the WSGI environ, records it for moto's
recorder, calls `dispatch` with the request's URL and headers, and answers what it returns in Flask's
Response, a ClientError as the 400 moto's adapter makes of it, with the header moto's CORS extension adds to
an SDK's request (a browser's, with an Origin, still goes the long way). The IAM check, the parsing, the
backends and the answer are moto's code as before; every other request goes to moto's dispatcher.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any

from moto.settings import DISABLE_GLOBAL_CORS

StartResponse = Callable[..., Any]
App = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]

# X-Amz-Target's prefix -> the moto response class whose `dispatch` moto's URL map routes "/" to
DIRECT_TARGETS = {
    "DynamoDB_20120810": ("moto.dynamodb.responses", "DynamoHandler"),
    "AmazonSQS": ("moto.sqs.responses", "SQSResponse"),
}


def direct_calls(fallback: App) -> App:
    """A WSGI app answering DynamoDB's and SQS's JSON calls through their moto response classes, and handing
    every other request to `fallback` (moto's dispatcher)."""
    from botocore.exceptions import ClientError
    from flask import Response
    from moto.moto_api import recorder
    from moto.moto_server.werkzeug_app import BackendRequest

    cors = () if DISABLE_GLOBAL_CORS else (("Access-Control-Allow-Origin", "*"),)
    handlers = {
        prefix: getattr(importlib.import_module(module), name).dispatch
        for prefix, (module, name) in DIRECT_TARGETS.items()
    }

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        target = str(environ.get("HTTP_X_AMZ_TARGET") or "")
        handler = handlers.get(target.split(".", 1)[0])
        if handler is None or environ.get("PATH_INFO") != "/" or _asks_cors(environ):
            return fallback(environ, start_response)
        request = BackendRequest(environ)  # the request class moto's Flask apps are given
        try:
            recorder._record_request(request)  # as moto's adapter does: a no-op unless its recorder is on
            result = handler(request, request.raw_url, dict(request.headers))
        except ClientError as error:
            result = 400, {}, error.response["Error"]["Message"]
        status, headers, body = result if len(result) == 3 else (200, {}, result)
        response = Response(response=body, status=status, headers=headers)
        response.headers.extend(cors)  # what moto's CORS extension adds to an answer to a request with no Origin
        answer: Iterable[bytes] = response(environ, start_response)
        return answer

    return app


def _asks_cors(environ: dict[str, Any]) -> bool:
    """A browser's request (an origin, a preflight): moto's CORS extension decides what to answer it."""
    return bool(environ.get("HTTP_ORIGIN") or environ.get("REQUEST_METHOD") == "OPTIONS" or
                environ.get("HTTP_ACCESS_CONTROL_REQUEST_PRIVATE_NETWORK"))  # fmt: skip
