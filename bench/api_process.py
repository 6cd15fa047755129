"""The frontend API in a process of its own, so its CPU time can be told apart from moto's."""

from __future__ import annotations

import argparse
import os
import signal
import threading

from atf_core.aws import ENDPOINT_ENV
from atf_local.api_server import ApiServer
from atf_local.iam.principals import lookup_at


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    port = parser.parse_args().port
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    signal.signal(signal.SIGINT, lambda *_: stopped.set())
    # Keys are looked up in the stack's process, which holds the embedded AWS's IAM and STS.
    server = ApiServer(port, lookup=lookup_at(os.environ[ENDPOINT_ENV])).start()
    stopped.wait()
    server.stop()


if __name__ == "__main__":
    main()
