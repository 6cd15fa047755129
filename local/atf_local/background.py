"""An HTTP server on 127.0.0.1 running in a daemon thread of this process."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer
from typing import Self

# How often a server's accept loop looks for a stop: shutdown() waits for that look, so socketserver's default
# of 0.5 s made every stop of a server (a stack's, a test's stand-in) take up to half a second.
SHUTDOWN_POLL_S = 0.05


class LocalHTTPServer(ThreadingHTTPServer):
    """A thread per request, and a listen queue as deep as werkzeug's: socketserver's 5 reset the
    connections of a client opening twenty at once (a script's thread pool) before the loop accepted them."""

    daemon_threads = True
    request_queue_size = 128


class BackgroundServer:
    def __init__(self, server: ThreadingHTTPServer, name: str) -> None:
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, args=(SHUTDOWN_POLL_S,), name=name, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
