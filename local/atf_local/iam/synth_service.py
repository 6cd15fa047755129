"""The client of the synthesis service: one long-lived process that synthesizes local stacks' templates.

A synthesis in a fresh process costs ~10 s, most of it node and aws-cdk-lib starting; the same process
synthesizes another configuration in ~1 s. So the first caller starts a service (atf_local.iam.synth)
listening on a Unix socket, and every process that needs a template asks it, one request at a time.
The service is one per checkout, Python environment and set of sources (its address is derived from them), so
an edit to the CDK app or another venv's aws-cdk-lib never gets an older service's template. It exits
after a while without requests, after a number of them, or when asked to stop.

The protocol: one JSON line each way. A request {"config": <StackConfig JSON>, "output": <path>} is
answered {"pid": <service pid>, "error": <traceback or null>} once the template is written to the path;
{"ping": true} and {"stop": true} are answered {"pid": ..., "error": null}, the second as the service ends.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# How long an idle service waits for the next request: a test run asks now and then, a user's `make
# run` once. Read by the caller that starts the service, which passes it on.
IDLE_ENV = "ATF_SYNTH_IDLE_SECONDS"
DEFAULT_IDLE_SECONDS = 60.0
# The node process keeps every app it synthesized: a service makes way for a fresh one after this many.
MOST_REQUESTS = 40
START_TIMEOUT_SECONDS = 120.0
REQUEST_TIMEOUT_SECONDS = 600.0


def send_line(connection: socket.socket, message: dict[str, Any]) -> None:
    connection.sendall(json.dumps(message).encode() + b"\n")


def receive_line(connection: socket.socket) -> dict[str, Any] | None:
    """The next message, or None where the peer closed before sending a whole one."""
    received = b""
    while not received.endswith(b"\n"):
        chunk = connection.recv(65536)
        if not chunk:
            return None
        received += chunk
    return json.loads(received)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class SynthService:
    """Where a synthesis service listens (`address`), the file it holds locked while it lives (`lock`), and
    how its processes start (`env`, `cwd`, the `log` they write to)."""

    address: Path
    lock: Path
    log: Path
    cwd: Path
    env: dict[str, str]

    def synthesize(self, config_json: str, output: Path) -> int:
        """Writes the flattened template for `config_json` to `output`; the pid of the service that did."""
        for _attempt in range(2):  # a service that reached its end as this request came in: once more
            with self._connect() as connection:
                try:
                    send_line(connection, {"config": config_json, "output": str(output)})
                    reply = receive_line(connection)
                except (ConnectionResetError, BrokenPipeError):
                    reply = None
            if reply is not None:
                if reply["error"]:
                    raise RuntimeError(f"cdk synth of the local stack failed:\n{reply['error'][-4000:]}")
                return int(reply["pid"])
        raise RuntimeError(f"the synthesis service closed without answering; its log: {self.log}")

    def stop(self) -> int | None:
        """Stops the service if one listens, and says which; starts none."""
        return self._tell({"stop": True})

    def ping(self) -> int | None:
        """The pid of the service listening, if one does; starts none."""
        return self._tell({"ping": True})

    def _tell(self, message: dict[str, Any]) -> int | None:
        try:
            with _connected(self.address) as connection:
                send_line(connection, message)
                reply = receive_line(connection)
        except (FileNotFoundError, ConnectionRefusedError):
            return None
        return None if reply is None else int(reply["pid"])

    def _connect(self) -> socket.socket:
        """A connection to the service, started if none listens. Starting ends once it listens, or once it
        finds another holding the lock: that one listens, or is ending, and then this starts another."""
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            try:
                return _connected(self.address)
            except (FileNotFoundError, ConnectionRefusedError):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no synthesis service at {self.address} in time") from None
            if self._start() != 0:
                raise RuntimeError(f"the synthesis service failed to start; its log: {self.log}")

    def _start(self) -> int:
        idle = self.env.get(IDLE_ENV, str(DEFAULT_IDLE_SECONDS))
        arguments = [str(self.address), str(self.lock), idle, str(MOST_REQUESTS)]
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            # Its own session: the service outlives the caller (a test, a stack) and its process group.
            starter = subprocess.run(
                [sys.executable, "-m", "atf_local.iam.synth", *arguments],
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                timeout=START_TIMEOUT_SECONDS,
                check=False,
            )
        return starter.returncode


def _connected(address: Path) -> socket.socket:
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.settimeout(REQUEST_TIMEOUT_SECONDS)
        connection.connect(str(address))
    except BaseException:
        connection.close()
        raise
    return connection
