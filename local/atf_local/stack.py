"""Start the local stack: moto's server on loopback, the table and queues, the consumer."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from atf_core.aws import make_clients
from atf_core.config import StackConfig
from atf_local import environment
from atf_local.api_server import ApiServer, frontend_handler
from atf_local.atomic import atomic_dynamodb
from atf_local.console import ConsoleServer
from atf_local.environment import REPO
from atf_local.fast_dynamodb import fast_dynamodb
from atf_local.fast_query import fast_queries
from atf_local.iam.accounts import credentials, enforce, operator_session, session_of
from atf_local.iam.roles import local_policies
from atf_local.iam.template import template_for
from atf_local.provision import provision
from atf_local.servers import MotoServer, first_server, start_sqs_process
from atf_local.stop_signal import start_child


def free_port(avoid: Iterable[int | None] = ()) -> int:
    """A loopback port nothing listens on, other than those in `avoid` and those this process was given
    already. The kernel draws bind(0)'s ports at random from about 14,000 here: it may hand out again a
    port that was picked, and so freed, but is not listened on yet (a stack's port, passed to the process
    that will serve it), and a stack would then start its second server on its first one's port."""
    taken = _GIVEN | {port for port in avoid if port}
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if port not in taken:
            _GIVEN.add(port)
            return port


_GIVEN: set[int] = set()  # the ports free_port() handed out in this process


def _refuse_if_taken(port: int) -> None:
    """Raise OSError (EADDRINUSE) if something already listens on loopback `port`."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))


def wait_for_port(port: int, timeout_s: float = 30.0, alive: subprocess.Popen[bytes] | None = None) -> None:
    """Until something listens on `port`; an error at once if the process `alive` that should listen exits."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if alive is not None and alive.poll() is not None:
            raise RuntimeError(f"the process that should listen on 127.0.0.1:{port} exited ({alive.returncode})")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout_s}s")


@dataclass
class LocalStack:
    """moto's servers: DynamoDB and the rest in this process, SQS in a child (atf_local.servers); the
    consumer in a child process, as its Lambda would run. Each component runs under its role's
    credentials, IAM enforced on both servers (atf_local.iam); the harness is the operator."""

    config: StackConfig
    aws_port: int = 4566
    sqs_port: int | None = None  # the SQS server's; None: a free port
    consumers: int = 1
    api_port: int | None = 8080  # the frontend API on loopback; None: no API
    console_port: int | None = None  # the web console on loopback (atf_local.console); None: no console
    _server: MotoServer | None = None
    _sqs: subprocess.Popen[bytes] | None = None
    _api: ApiServer | None = None
    _console: ConsoleServer | None = None
    _children: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _unenforce: Callable[[], None] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.aws_port}"

    @property
    def sqs_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.sqs_port}"

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def console_url(self) -> str | None:
        return self._console.url if self._console is not None else None

    def start(self, with_consumer: bool = True) -> None:
        """Serve; if any part cannot start (a port taken meanwhile, say), stop the parts that did first: no SQS
        process, server or consumer outlives a stack that did not start."""
        try:
            self._start(with_consumer)
        except BaseException:
            self.stop()
            raise

    def _start(self, with_consumer: bool) -> None:
        import logging

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        atomic_dynamodb()  # DynamoDB applies a conditional write atomically; plain moto does not
        fast_queries()  # a Query reads its partition, not the whole table, as DynamoDB's does
        fast_dynamodb()  # item answers written as the JSON they are, not walked through botocore's shapes
        if self.sqs_port:
            _refuse_if_taken(self.sqs_port)  # a server already there would answer for ours: wait_for_port can't tell
        self.sqs_port = self.sqs_port or free_port(avoid=(self.aws_port, self.api_port, self.console_port))
        environment.apply(self.endpoint, self.config.model_dump_json(), self.sqs_endpoint)
        self._sqs = start_sqs_process(self.sqs_port, dict(os.environ), str(REPO))  # starts while we synthesize
        policies = local_policies(template_for(self.config))  # synthesized or cached, before anything listens
        wait_for_port(self.sqs_port, timeout_s=120, alive=self._sqs)  # importing moto: seconds, more under load
        self._server = first_server(self.aws_port, self.sqs_endpoint).start()
        wait_for_port(self.aws_port)
        self._unenforce = enforce(self.endpoint, policies, mirrors=(self.sqs_endpoint,))
        provision(make_clients(self.endpoint, session=operator_session()), self.config)
        if self.api_port is not None:
            frontend = session_of(credentials(self.endpoint, "frontend"))
            self._api = ApiServer(self.api_port, frontend_handler(frontend)).start()
        if self.console_port is not None:
            self._console = _start_console(self.config, self.endpoint, self.console_port)
        if with_consumer:
            for index in range(self.consumers):
                self._children.append(start_consumer(self.endpoint, self.config, index, self.consumers))

    def stop(self) -> None:
        if self._api is not None:
            self._api.stop()
        if self._console is not None:
            self._console.stop()
        for child in self._children:
            child.terminate()
        for child in self._children:
            _ended(child)
        if self._server is not None:
            self._server.stop()
        if self._sqs is not None:
            self._sqs.terminate()
            _ended(self._sqs)  # one that outstays its time is killed: the rest of the stop still runs
        if self._unenforce is not None:
            self._unenforce()


STOP_WAIT_S = 10.0  # what a terminated child has to end before it is killed


def _ended(child: subprocess.Popen[bytes]) -> None:
    try:
        child.wait(timeout=STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def _start_console(config: StackConfig, endpoint: str, port: int) -> ConsoleServer | None:
    # The console is a convenience: a port someone else holds must not stop the stack.
    try:
        return ConsoleServer(config, endpoint, port).start()
    except OSError as error:
        print(f"  console not started: 127.0.0.1:{port}: {error.strerror}", file=sys.stderr, flush=True)
        return None


def start_consumer(endpoint: str, config: StackConfig, index: int = 0, of: int = 1) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "atf_local", "consumer", "--group", str(index), "--groups", str(of)]
    env = environment.component_environment(endpoint, config.model_dump_json(), "consumer")
    return start_child(command, env=env, cwd=REPO)
