"""The local stack's ports: the kernel may draw the same loopback port twice, and a port may serve one stack
after another."""

from __future__ import annotations

import itertools
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from atf_local import stack


class _DrawnPorts:
    """A socket whose bind(0) gets the next of the given ports, as the kernel's random draw might."""

    draws: Iterator[int] = iter(())

    def __init__(self, *args: Any) -> None:
        self._port = 0

    def __enter__(self) -> _DrawnPorts:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def bind(self, address: tuple[str, int]) -> None:
        self._port = next(self.draws)

    def getsockname(self) -> tuple[str, int]:
        return ("127.0.0.1", self._port)


@pytest.fixture
def kernel_draws(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(stack, "_GIVEN", set())
    monkeypatch.setattr(socket, "socket", _DrawnPorts)

    def draw(*ports: int) -> None:
        _DrawnPorts.draws = itertools.chain(ports)

    return draw


def test_a_port_drawn_again_is_not_given_twice(kernel_draws: Any) -> None:
    # Given the kernel draws 40001 twice in a row (it was freed after the first draw)
    kernel_draws(40001, 40001, 40003)
    # When a stack's two ports are picked before either is listened on
    first, second = stack.free_port(), stack.free_port()
    # Then they differ
    assert (first, second) == (40001, 40003)


def test_the_ports_to_avoid_are_skipped(kernel_draws: Any) -> None:
    # Given another process was told to serve on 40005, and the kernel draws it here
    kernel_draws(40005, 40007)
    # Then the stack's SQS server is not put on the port its first server will take
    assert stack.free_port(avoid=(40005, None)) == 40007


def _serve_endpoints(port: int, sqs: str) -> Any:
    """A stand-in for a stack's first server on `port`: it names `sqs` as where SQS is served."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Endpoints(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({"sqs": sqs}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return None

    server = HTTPServer(("127.0.0.1", port), Endpoints)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_a_stack_served_later_on_the_same_port_is_asked_anew() -> None:
    from atf_local.environment import sqs_endpoint_of

    # Given a stack on a port, asked where it serves SQS
    first = _serve_endpoints(0, "http://127.0.0.1:1111")
    port = first.server_address[1]
    endpoint = f"http://127.0.0.1:{port}"
    assert sqs_endpoint_of(endpoint) == "http://127.0.0.1:1111"
    first.shutdown()
    first.server_close()
    # When another stack is served on that port
    second = _serve_endpoints(port, "http://127.0.0.1:2222")
    try:
        # Then its own SQS server is named, not the stopped one's
        assert sqs_endpoint_of(endpoint) == "http://127.0.0.1:2222"
    finally:
        second.shutdown()
        second.server_close()
