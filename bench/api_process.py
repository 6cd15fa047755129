"""The frontend API in a process of its own, so its CPU time can be told apart from moto's."""

from __future__ import annotations

import argparse
import signal
import threading

from atf_local.api_server import ApiServer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    port = parser.parse_args().port
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    signal.signal(signal.SIGINT, lambda *_: stopped.set())
    server = ApiServer(port).start()
    stopped.wait()
    server.stop()


if __name__ == "__main__":
    main()
