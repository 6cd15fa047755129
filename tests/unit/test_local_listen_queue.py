"""The local API answers a client that opens many connections at once (a script's thread pool)."""

from __future__ import annotations

import http.client
import threading
from typing import Any

from atf_local.api_server import ApiServer
from atf_local.stack import free_port

AT_ONCE = 64


def _unused(event: Any, context: Any) -> Any:
    raise AssertionError("an unsigned request never reaches the handler")


def _all_at_once(port: int) -> tuple[list[int], list[OSError]]:
    """AT_ONCE connections opened together, each asking once: the statuses answered, and the failures."""
    start, statuses, failures = threading.Barrier(AT_ONCE), list[int](), list[OSError]()

    def ask() -> None:
        start.wait()
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            connection.request("GET", "/v1/openapi.json")
            statuses.append(connection.getresponse().status)
        except OSError as error:
            failures.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=ask) for _ in range(AT_ONCE)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses, failures


def test_many_connections_opened_at_once_are_all_answered() -> None:
    server = ApiServer(free_port(), handler=_unused, lookup=lambda key: None).start()
    try:
        for _ in range(5):
            statuses, failures = _all_at_once(server.port)
            assert failures == [] and statuses == [403] * AT_ONCE  # unsigned: refused, but answered
    finally:
        server.stop()
