"""The embedded AWS's servers keep a client's connection open between calls, as AWS's endpoints do, and
never let one request's body run into the next."""

from __future__ import annotations

import http.client
import logging
import socket
import time
from collections.abc import Iterable, Iterator
from typing import Any

import boto3
import pytest

from atf_local.servers import MotoServer
from atf_local.stack import free_port


def toy(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    """Answers with its path; /ignore leaves the body unread, /fail raises, /read echoes the body."""
    path = environ["PATH_INFO"]
    if path == "/fail":
        raise RuntimeError("the application failed")
    said = environ["wsgi.input"].read() if path == "/read" else b""
    start_response("200 OK", [("Content-Type", "text/plain"), ("Connection", "close")])
    return [path.encode(), b":", said]


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    chosen = free_port()
    server = MotoServer(chosen, lambda _moto: toy).start()
    yield chosen
    server.stop()


def ask(connection: http.client.HTTPConnection, path: str, body: bytes = b"", **headers: str) -> tuple[int, bytes, str]:
    connection.request("POST", path, body=body, headers=headers)
    answer = connection.getresponse()
    return answer.status, answer.read(), str(answer.getheader("Connection"))


def test_a_connection_serves_one_call_after_another(port: int) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    # Given a first call answered
    assert ask(connection, "/read", b"one") == (200, b"/read:one", "None")
    first = connection.sock
    # Then the next ones go over the same socket (the application's own Connection header is not the server's)
    assert ask(connection, "/read", b"two") == (200, b"/read:two", "None")
    assert ask(connection, "/third") == (200, b"/third:", "None")
    assert connection.sock is first


def test_a_body_the_application_left_unread_does_not_become_the_next_request(port: int) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    # Given a body that looks like a request, left unread
    smuggled = b"POST /smuggled HTTP/1.1\r\nContent-Length: 0\r\n\r\n"
    assert ask(connection, "/ignore", smuggled)[:2] == (200, b"/ignore:")
    # Then the next request on the connection is the one sent, and it is answered
    assert ask(connection, "/read", b"after") == (200, b"/read:after", "None")


@pytest.mark.parametrize("case", ["client asks", "chunked body", "application fails"])
def test_the_connection_closes_when_it_must(port: int, case: str) -> None:
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    head = {
        "client asks": b"POST /read HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi",
        "chunked body": b"POST /read HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
        "application fails": b"POST /fail HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi",
    }[case]
    raw.sendall(head)
    # When the answer is read to the end of the stream
    received = b""
    while chunk := raw.recv(65536):
        received += chunk
    raw.close()
    # Then the server closed the connection after one whole answer
    status = b"500" if case == "application fails" else b"200"
    assert received.startswith(b"HTTP/1.1 " + status) and received.count(b"HTTP/1.1") == 1
    assert b"\r\nConnection: close\r\n" in received
    if status == b"200":
        assert received.endswith(b"/read:hi")


def test_a_client_gone_mid_body_is_no_failure_and_the_server_serves_on(
    port: int, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a client (a worker host killed mid-call) that sends part of a body the application reads, and goes
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    raw.sendall(b"POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly ten b")
    raw.close()
    # Then the next client is served, and the server logged no failure (nor a traceback) for the one gone
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for _ in range(20):  # the gone client's thread may finish after the next client's answer
        assert ask(connection, "/read", b"next") == (200, b"/read:next", "None")
        time.sleep(0.05)
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_boto3_calls_reuse_their_connections_against_moto() -> None:
    # Given moto's own dispatcher behind the server, noting the client port of each call
    ports: list[int] = []

    def noting(moto: Any) -> Any:
        def app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
            ports.append(environ["REMOTE_PORT"])
            return moto(environ, start_response)  # type: ignore[no-any-return]

        return app

    chosen = free_port()
    server = MotoServer(chosen, noting).start()
    try:
        tables = boto3.client(
            "dynamodb", endpoint_url=f"http://127.0.0.1:{chosen}", region_name="us-east-1",
            aws_access_key_id="testing", aws_secret_access_key="testing",
        )  # fmt: skip
        # When a client makes several calls, one after another (moto's tables are this process's: another
        # test's may be there)
        answers = [tables.list_tables()["TableNames"] for _ in range(5)]
        # Then each is answered, all over one connection
        assert all(answer == answers[0] for answer in answers) and len(ports) == 5
        assert len(set(ports)) == 1, ports
    finally:
        server.stop()


def test_a_stopped_server_answers_no_more_calls_on_kept_connections() -> None:
    # Given a connection kept open after a call
    chosen = free_port()
    server = MotoServer(chosen, lambda _moto: toy).start()
    connection = http.client.HTTPConnection("127.0.0.1", chosen, timeout=10)
    assert ask(connection, "/read", b"before")[:2] == (200, b"/read:before")
    # When the server stops
    server.stop()
    # Then the kept connection is closed, and a new one is refused
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        ask(connection, "/read", b"after")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", chosen), timeout=5)
