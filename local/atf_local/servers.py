"""The embedded AWS: one moto server per busy service, so they run on separate cores.

moto's server is one Python process; under load it is bound by its own CPU (the GIL). The local stack
therefore serves DynamoDB (with IAM, STS and everything else) from a server in its own process and SQS
from a second server in a child process. Each component's process reaches SQS directly through
botocore's standard per-service variable, AWS_ENDPOINT_URL_SQS (atf_local.environment); a client that
only knows the stack's one endpoint still works: the first server forwards SQS requests to the second.

Both processes enforce IAM on the same principals: the SQS process creates the operator itself, the
stack puts each role's policy on both (atf_local.iam.accounts.enforce), and every session STS hands
out on the first server is registered on the second (atf_local.iam.accounts.mirror_sessions), so a
component's one set of credentials is known, with the same grants, wherever it calls.

    python -m atf_local.servers sqs --port 4567     # the SQS process (the stack starts it)
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from typing import Any, ClassVar
from urllib.parse import urlsplit

from werkzeug.exceptions import ClientDisconnected
from werkzeug.serving import WSGIRequestHandler
from werkzeug.wsgi import LimitedStream

from atf_local import request_head
from atf_local.background import SHUTDOWN_POLL_S
from atf_local.direct_calls import direct_calls
from atf_local.stop_signal import start_child

ENDPOINTS_PATH = "/_atf/endpoints"  # on the first server: where each service is served
SESSIONS_PATH = "/_atf/sessions"  # on the SQS server: register a session STS gave on the first
PRINCIPALS_PATH = "/_atf/principal"  # on the first server: who holds an access key (atf_local.iam.principals)
# Headers of one connection, not of the answer (and its length, set anew)
_HOP_BY_HOP = {"content-length", "connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}

StartResponse = Callable[..., Any]
App = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


class MotoServer:
    """moto's server on loopback in this process's threads, wrapped by `wrap`: DynamoDB's and SQS's JSON calls
    go straight to moto's response classes (atf_local.direct_calls), and a request's head is read without
    the email package where its lines are plain (atf_local.request_head)."""

    def __init__(self, port: int, wrap: Callable[[App], App]) -> None:
        from moto.moto_server import werkzeug_app
        from werkzeug.serving import make_server

        app = wrap(direct_calls(moto_dispatcher()))
        # The request handler moto's own server uses, where this moto has one (later 5.2 releases: it keeps
        # headers with underscores, which only S3 needs); werkzeug's otherwise, as moto's server did then.
        self._handler = keep_alive(getattr(werkzeug_app, "MotoRequestHandler", None) or WSGIRequestHandler)
        # Bound here, so a port taken meanwhile is an OSError the caller can act on (werkzeug's own bind prints
        # and calls sys.exit); the server serves a duplicate of the socket, and this one is closed.
        with socket.create_server(("127.0.0.1", port)) as listening:
            self._server = make_server(
                "127.0.0.1", port, app, threaded=True, request_handler=self._handler, fd=listening.fileno()
            )
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(SHUTDOWN_POLL_S,), daemon=True, name=f"moto-{port}"
        )

    def start(self) -> MotoServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Serve no more calls: refuse new connections and end the kept ones (their threads outlive the
        accept loop)."""
        self._server.shutdown()
        self._thread.join()
        self._server.server_close()
        for connection in list(self._handler.open_connections):
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


def keep_alive(handler: type[WSGIRequestHandler]) -> Any:
    """`handler`, serving an HTTP/1.1 client's next request on the same connection, as AWS's endpoints do.

    werkzeug's server closes every connection after one answer: Python's http.server cannot tell where a
    request's body ends if the application reads only part of it, and werkzeug then reads whatever else the
    socket holds. So every AWS call opened a connection and the server started a thread for it: profiled
    (py-spy) under a put/claim/get loop, ~20% of a moto server's samples were its accept loop, most of them
    starting that thread. Here the answer is written whole (AWS's answers are small), a body of
    known length is read to its end whatever the application read, and the connection stays open unless
    the client asked to close it. A chunked body, or an application error, closes it.
    """

    class KeepAlive(handler):  # type: ignore[valid-type,misc]
        open_connections: ClassVar[set[socket.socket]] = set()  # this server's (one class per server)

        def handle(self) -> None:
            self.open_connections.add(self.connection)
            try:
                super().handle()
            finally:
                self.open_connections.discard(self.connection)

        def parse_request(self) -> bool:
            return request_head.parse_request(self, super().parse_request)

        def run_wsgi(self) -> None:
            if self.headers.get("Expect", "").lower().strip() == "100-continue":
                self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            environ = self.make_environ()  # werkzeug's (and moto's, which keeps underscored headers)
            body = None
            if not environ.get("wsgi.input_terminated"):  # werkzeug's mark of a chunked body
                body = environ["wsgi.input"] = LimitedStream(self.rfile, int(environ.get("CONTENT_LENGTH") or 0))
            answer = _answer(self.server.app, environ, self.log_error)
            if answer is None:  # gone before its body ended (a killed host): no one to answer, no fault
                self.close_connection = True
                return
            status, headers, content, failed = answer
            if self.command == "HEAD":
                content = b""  # its headers only (no AWS call this stack serves is a HEAD)
            if not _read_to_end(None if failed else body):  # after a failure, where the body ends is not known
                self.close_connection = True
            self.wfile.write(_head(status, headers, len(content), self.close_connection) + content)

    return KeepAlive


def _read_to_end(body: LimitedStream | None) -> bool:
    """Whether the connection can serve a next request: a body of known length read to its end (the next
    request starts there)."""
    if body is None:
        return False
    try:
        body.exhaust()
    except ClientDisconnected:
        return False
    return True


def _answer(
    app: App, environ: dict[str, Any], log_error: Callable[..., None]
) -> tuple[str, list[tuple[str, str]], bytes, bool] | None:
    """The application's whole answer and whether it failed (a 500, as werkzeug answers a failure); None when
    the client went away before its body ended."""
    try:
        return (*_whole_answer(app, environ), False)
    except ClientDisconnected:
        return None
    except Exception:  # noqa: BLE001 -- any failure is a 500 to the client
        log_error("moto failed a request:\n%s", traceback.format_exc())
        return "500 Internal Server Error", [], b"", True


def _whole_answer(app: App, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
    started: list[Any] = []
    chunks: list[bytes] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
        started[:] = [status, headers]
        return chunks.append

    answer = app(environ, start_response)
    try:
        chunks.extend(answer)
    finally:
        if hasattr(answer, "close"):
            answer.close()
    return started[0], started[1], b"".join(chunks)


def _head(status: str, headers: list[tuple[str, str]], length: int, close: bool) -> bytes:
    kept = [f"{k}: {v}" for k, v in headers if k.lower() not in _HOP_BY_HOP]
    lines = [f"HTTP/1.1 {status}", *kept, f"Content-Length: {length}", *(["Connection: close"] if close else [])]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def moto_dispatcher() -> App:
    """moto's own server app: its dispatcher over a Flask app per service, with its lookups remembered."""
    from moto.moto_server import werkzeug_app

    dispatcher = werkzeug_app.DomainDispatcherApplication(werkzeug_app.create_backend_app)
    remember_backends(dispatcher)
    remember_actions()
    return dispatcher


def remember_backends(dispatcher: Any) -> None:
    """Answer "which service serves this host" once per host. moto's dispatcher works it out on every request,
    holding the lock all requests share, by listing its own package directory (a stat per service) and then
    trying its URL patterns: ~0.6 ms a request here, every request waiting its turn. Its answer for a host
    never changes: the directory and the patterns are fixed when moto is installed."""
    dispatcher.get_backend_for_host = functools.lru_cache(maxsize=1024)(dispatcher.get_backend_for_host)


def remember_actions() -> None:
    """Find a service's actions once per service. moto lists every function of a response class (with
    inspect.getmembers, sorting them) on every request, to see whether the action asked for is one of
    them: ~3% of the DynamoDB server's time in the benchmarks. A class's functions are fixed once moto is
    imported."""
    from moto.core import responses

    module: Any = responses  # it imports the function without re-exporting it
    if not hasattr(module.method_names_from_class, "cache_info"):
        module.method_names_from_class = functools.lru_cache(maxsize=256)(module.method_names_from_class)


def freeze_survivors() -> None:
    """For a process that serves the embedded AWS (not a test's): after each full collection, what survived
    it leaves the collector's sight (gc.freeze). moto's tables are hundreds of thousands of long-lived
    objects, and every full collection walked them all with the process stopped: in the start-lag
    benchmark ten of them in 75 s, the last ones 0.27 and 0.47 s, every call waiting. What is frozen is
    still freed when its last reference goes; only a reference cycle among objects that were alive at a
    freeze is never collected."""
    if _freeze_after_full not in gc.callbacks:
        gc.callbacks.append(_freeze_after_full)


def _freeze_after_full(phase: str, info: dict[str, int]) -> None:
    if phase == "stop" and info["generation"] == 2:
        gc.freeze()


def first_server(port: int, sqs_endpoint: str) -> MotoServer:
    """DynamoDB, IAM, STS and the rest; SQS forwarded to `sqs_endpoint`; the endpoints named on request."""

    def wrap(app: App) -> App:
        def route(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
            if environ.get("PATH_INFO") == ENDPOINTS_PATH:
                return _json(start_response, {"sqs": sqs_endpoint})
            if environ.get("PATH_INFO") == PRINCIPALS_PATH and environ.get("REQUEST_METHOD") == "POST":
                return _principal(environ, start_response)
            if service_of(environ) == "sqs":
                return _forward(environ, start_response, sqs_endpoint)
            return app(environ, start_response)

        return route

    return MotoServer(port, wrap)


def _principal(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    """For an API server in another process (the benchmarks'): the holder of a key, and its policies."""
    from atf_local.iam.principals import principal_for_key, to_record

    length = int(environ.get("CONTENT_LENGTH") or 0)
    found = principal_for_key(str(json.loads(environ["wsgi.input"].read(length) or b"{}").get("access_key_id")))
    return _json(start_response, {"principal": to_record(found) if found else None})


def service_of(environ: dict[str, Any]) -> str | None:
    """The service a request is signed for (SigV4's credential scope), as moto's dispatcher reads it."""
    auth = str(environ.get("HTTP_AUTHORIZATION") or "")
    try:
        return auth.split(",")[0].split()[1].split("/")[3].lower()
    except IndexError:
        target = str(environ.get("HTTP_X_AMZ_TARGET") or "")
        return "sqs" if target.startswith("AmazonSQS") else None


def _forward(environ: dict[str, Any], start_response: StartResponse, endpoint: str) -> Iterable[bytes]:
    # The Host header goes unchanged: the request's signature covers it.
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    headers = {key[5:].replace("_", "-").title(): value for key, value in environ.items() if key.startswith("HTTP_")}
    for key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        if environ.get(key):
            headers[key.replace("_", "-").title()] = environ[key]
    path = environ.get("RAW_URI") or environ.get("PATH_INFO", "/")
    if environ.get("QUERY_STRING") and "?" not in path:
        path += "?" + environ["QUERY_STRING"]
    target = urlsplit(endpoint)
    connection = http.client.HTTPConnection(target.hostname or "127.0.0.1", target.port, timeout=60)
    try:
        connection.request(environ["REQUEST_METHOD"], path, body=body, headers=headers)
        answer = connection.getresponse()
        content = answer.read()
        kept = [(k, v) for k, v in answer.getheaders() if k.lower() not in _HOP_BY_HOP]
        start_response(f"{answer.status} {answer.reason}", [*kept, ("Content-Length", str(len(content)))])
        return [content]
    finally:
        connection.close()


def _json(start_response: StartResponse, document: dict[str, Any]) -> Iterable[bytes]:
    content = json.dumps(document).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(content)))])
    return [content]


def start_sqs_process(port: int, env: dict[str, str], cwd: str) -> subprocess.Popen[bytes]:
    """The SQS server as a child of this process (it exits when this process does)."""
    command = [sys.executable, "-m", "atf_local.servers", "sqs", "--port", str(port)]
    return start_child(command, env=env, cwd=cwd)


def _serve_sqs(port: int) -> None:
    from atf_local.fast_sqs import fast_sqs
    from atf_local.iam.accounts import accept_sessions, enforce_here

    enforce_here()
    freeze_survivors()
    fast_sqs()  # SQS's calls cost what they ask for, not the queue's depth many times over

    def wrap(app: App) -> App:
        def route(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
            if environ.get("PATH_INFO") == SESSIONS_PATH and environ.get("REQUEST_METHOD") == "POST":
                length = int(environ.get("CONTENT_LENGTH") or 0)
                accept_sessions(json.loads(environ["wsgi.input"].read(length) or b"[]"))
                return _json(start_response, {"accepted": True})
            return app(environ, start_response)

        return route

    MotoServer(port, wrap).start()
    _exit_with_parent()


def _exit_with_parent() -> None:
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(0.5)


def main(argv: list[str] | None = None) -> None:
    import logging

    parser = argparse.ArgumentParser(prog="python -m atf_local.servers", description=__doc__)
    parser.add_argument("service", choices=["sqs"])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    _serve_sqs(args.port)


if __name__ == "__main__":
    main()
