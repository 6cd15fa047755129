"""A worker host: one controller and its executor processes.

    atf worker examples.lambdas:lambdas --executors 2 --threads 4

Before it reports ready the host checks that it can reach its table and every
queue it serves, and stops with one line naming what it cannot reach.

Executors fork from a fork server (multiprocessing's forkserver, a child of the
host started with its first executor) that imported the executor's modules
once (atf_sdk.worker.preload); each executor imports the lambdas module itself,
after the fork. The server ends once the host and all its executors have.

SIGTERM (or Ctrl-C) drains the host: the controller stops receiving and
claiming, waits for the receives in flight (a long poll cannot be called off),
hands every message it holds back to SQS, and the host waits for running tasks
to finish before it exits. A second SIGTERM or Ctrl-C while it drains stops it
at once: its running tasks stop with their executors, the host records their
attempts as lost before it exits, and they run again, fenced by their attempt. An
executor that dies (killed, or ended by its own heartbeat guard) is replaced while
the host runs; the attempts it held are recorded as lost as its connections close
(attempt_ends), so they run again after their backoff, not once their lease lapses.

Every few seconds the host writes its health to a file (atf_sdk.worker.health), which the
container's health check reads: unhealthy once a receiver has ended or hangs, or an executor
pool keeps dying as it starts, so that ECS replaces a host that cannot mend itself.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.forkserver
import os
import secrets
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from pathlib import Path

from atf_core.aws import ENDPOINT_ENV, AwsClients, make_clients
from atf_core.clock import process_clock
from atf_core.config import StackConfig
from atf_core.definitions import queue_name
from atf_core.schema import Task
from atf_core.store.tasks import DynamoTaskStore
from atf_core.telemetry import Metric, MetricBuffer, watch_throttles
from atf_sdk.worker.attempt_ends import AttemptEnds, after_finish, limits_and_chains
from atf_sdk.worker.controller import DRAIN_POLL_S, Controller, ControllerSettings, NextWorkServer
from atf_sdk.worker.executor import ExecutorSpec, executor_main
from atf_sdk.worker.health import (
    REPORT_EVERY_S,
    ExecutorStarts,
    HealthFile,
    HealthReport,
    receiver_notes,
    receiver_problems,
)
from atf_sdk.worker.observe import route_metrics, service_name, setup_logging
from atf_sdk.worker.registry import load_lambdas
from atf_sdk.worker.socket_dirs import SocketDirectory, remove_abandoned
from atf_sdk.worker.stop_signals import STOP_SIGNALS, ignore_stop_signals, stop_signals_held

log = logging.getLogger("atf.host")
# What the fork server imports before it forks an executor; never imported by the host itself (it ignores SIGTERM).
PRELOAD = "atf_sdk.worker.preload"
# The longest path of a Unix socket: sun_path's 108 bytes on Linux (104 on macOS), less the terminating NUL
SOCKET_PATH_BYTES = 103 if sys.platform == "darwin" else 107
# How long a stopping host waits for the losses of the executors it stopped to be recorded: the drain's 110 s and
# this stay inside Fargate's 120 s stop timeout. A loss not recorded by then waits out its lease.
LOSS_RECORD_S = 4.0
READY_WAIT_S = 60.0  # how long a starting host waits for its executor threads to connect before it serves anyway


@dataclass(frozen=True)
class HostSettings:
    lambdas_spec: str
    executors_per_lambda: int = 2
    threads_per_executor: int = 4
    drain_timeout_s: float = 110.0  # inside Fargate's 120 s stop timeout
    only: tuple[str, ...] = ()  # serve just these lambdas (default: all registered ones the stack knows)
    only_from: str = "--only"  # where `only` came from, for errors: the option or ATF_LAMBDA
    metrics: str = "auto"  # see observe.route_metrics
    health_file: Path | None = None  # where the host reports its health (atf_sdk.worker.health); None: nowhere
    controller: ControllerSettings = field(default_factory=ControllerSettings)


class HostError(Exception):
    """Why a worker host cannot start, in one line for whoever started it."""


class LambdasMisnamed(HostError):
    """The lambdas it was given (the module, --only, ATF_LAMBDA) do not load or are not the stack's."""


class WorkerHost:
    def __init__(self, config: StackConfig, settings: HostSettings, clients: AwsClients | None = None) -> None:
        self._config = config
        self._settings = settings
        self._endpoint = os.environ.get(ENDPOINT_ENV)
        self._clients = clients or make_clients(self._endpoint)
        self.lambda_names = served_lambdas(settings, config)
        self._store = DynamoTaskStore(self._clients.dynamodb, config)
        self.metrics = MetricBuffer(service=service_name())  # the controller's; each executor has its own
        for client in (self._clients.dynamodb, self._clients.sqs, self._clients.sqs_long_poll):
            watch_throttles(client, lambda _: self.metrics.count(Metric.THROTTLES))
        self.controller = Controller(
            self._store,
            self._clients.sqs,
            self._clients.sqs_long_poll,
            config,
            self.lambda_names,
            settings.controller,
            store_client=self._clients.dynamodb,
            metrics=self.metrics,
            clock=process_clock,
        )
        # An executor that dies holding tasks: their attempts' ends are recorded here, as its connections close
        follow = after_finish(*limits_and_chains(self._store, self._clients.dynamodb, config, process_clock))
        self.attempt_ends = AttemptEnds(self._store, config, self.metrics, process_clock, follow)
        self._authkey = secrets.token_bytes(16)
        self._server, self._socket_directory = _listen(self.controller, self._authkey, self.attempt_ends.lost)
        self._executors: dict[tuple[str, int], BaseProcess] = {}
        self._starts = ExecutorStarts()
        self._server_thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="nextwork")
        self._health = HealthFile(settings.health_file) if settings.health_file is not None else None
        self._reported = 0.0  # when the health report was last made (monotonic)
        self._problems: list[str] = []  # in the last report
        self._unwritten = False  # the last report could not be written
        self._stop = threading.Event()
        self._stop_now = threading.Event()  # a second stop signal: cut the drain short
        # Executors fork from a server that imported their modules once (atf_sdk.worker.preload): a spawned
        # executor spent ~0.9 s of CPU importing boto3, pydantic and the framework before it could start. The
        # lambdas module is imported by each executor after the fork, as under spawn (executor_main).
        self._mp = multiprocessing.get_context("forkserver")
        self._mp.set_forkserver_preload([PRELOAD])

    def serve(self) -> None:
        """Run until SIGTERM/SIGINT, then drain."""
        for stop_signal in STOP_SIGNALS:
            signal.signal(stop_signal, self._on_stop_signal)
        setup_logging()
        log.info(route_metrics(self._settings.metrics))
        try:
            self.start()
        except BaseException:  # it cannot reach its table or a queue, say: no socket or directory is left behind
            self._release()
            raise
        while not self._stop.wait(0.5):
            self._replace_dead_executors()
            if time.monotonic() - self._reported >= REPORT_EVERY_S:
                self._report(self.health())
        self.drain()

    def start(self) -> None:
        self.check_reach()
        _start_fork_server()
        self._server_thread.start()
        self.metrics.start()
        self.controller.start_receivers()
        for name in self.lambda_names:
            for slot in range(self._settings.executors_per_lambda):
                self._start_executor(name, slot)
        log.info("worker host serving %s", ", ".join(self.lambda_names))
        expected = len(self.lambda_names) * self._settings.executors_per_lambda * self._settings.threads_per_executor
        deadline = time.monotonic() + READY_WAIT_S
        while self._server.connections < expected and time.monotonic() < deadline and not self._stop.is_set():
            time.sleep(0.05)
        log.info("worker host ready: %d executor threads connected", self._server.connections)
        self._report(self.health())

    def check_reach(self) -> None:
        """Raise HostError naming the table or queue this host cannot reach (and where it looked)."""
        where = self._endpoint or f"AWS's endpoints ({ENDPOINT_ENV} is not set)"
        try:
            self._store.gates()
        except Exception as error:
            raise HostError(f"cannot reach table {self._config.table_name} at {where}: {_one_line(error)}") from error
        for name in self.lambda_names:
            for priority in self._config.lambdas[name].priorities:
                for part in range(self._config.queue_parts_of(name)):
                    try:
                        self.controller.queue_url(name, priority, part)
                    except Exception as error:
                        queue = queue_name(self._config, name, priority, part)
                        raise HostError(f"cannot reach queue {queue} at {where}: {_one_line(error)}") from error

    def _start_executor(self, lambda_name: str, slot: int) -> None:
        spec = ExecutorSpec(
            lambda_name=lambda_name,
            lambdas_spec=self._settings.lambdas_spec,
            address=self._server.address,
            authkey=self._authkey,
            threads=self._settings.threads_per_executor,
            config_json=self._config.model_dump_json(),
            endpoint_url=self._endpoint,
            environ=dict(os.environ),
        )
        process = self._mp.Process(target=executor_main, args=(spec,), name=f"executor-{lambda_name}-{slot}")
        process.start()
        self._executors[(lambda_name, slot)] = process
        self._starts.started(lambda_name, slot)

    def _replace_dead_executors(self) -> None:
        for (name, slot), process in list(self._executors.items()):
            if not process.is_alive():
                log.warning(
                    "executor %s-%d (pid %s) exited with %s; starting another",
                    name,
                    slot,
                    process.pid,
                    process.exitcode,
                )
                ran_a_task = process.pid is not None and self._server.handed_work(process.pid)
                self._starts.exited(name, slot, process.exitcode, ran_a_task)
                self._start_executor(name, slot)

    def health(self, state: str = "serving") -> HealthReport:
        """What is wrong with this host that it cannot mend itself (nothing, if `problems` is empty)."""
        receivers = self.controller.receivers()
        problems = [] if self._server_thread.is_alive() else ["the NextWork server has stopped: no executor gets work"]
        problems += receiver_problems(receivers, self.controller.receiver_stuck_after_s)
        problems += self._starts.problems()
        return HealthReport(os.getpid(), time.time(), state, self.lambda_names, problems, receiver_notes(receivers))

    def _report(self, report: HealthReport) -> None:
        """Write the health report; log when the host turns unhealthy (and why) or healthy again, not at
        every report."""
        self._reported = time.monotonic()
        if len(report.problems) != len(self._problems):
            if report.problems:
                log.error("worker host unhealthy: %s", "; ".join(report.problems))
            else:
                log.info("worker host healthy again")
        self._problems = report.problems
        if self._health is None:
            return
        try:
            self._health.write(report)
        except OSError as error:  # the probe fails then, as the report it reads goes stale
            if not self._unwritten:
                log.error("cannot write the health report %s: %s", self._health.path, error)
            self._unwritten = True
            return
        self._unwritten = False

    def _on_stop_signal(self, *_: object) -> None:
        (self._stop_now if self._stop.is_set() else self._stop).set()

    def drain(self) -> None:
        log.info("draining: no new claims; waiting for running tasks (stop again to stop them now)")
        self._report(self.health("draining"))
        deadline = time.monotonic() + self._settings.drain_timeout_s  # the executors finish meanwhile
        self.controller.drain(self._stop_now)
        while not self._stop_now.is_set() and time.monotonic() < deadline:
            alive = [process for process in self._executors.values() if process.is_alive()]
            if not alive:
                break
            alive[0].join(min(DRAIN_POLL_S, max(0.0, deadline - time.monotonic())))
        stopped = [process for process in self._executors.values() if process.is_alive()]
        if stopped:  # past the stop timeout, or told twice
            log.warning(
                "stopping %d executor(s) with their running tasks: each attempt is recorded as lost, and runs again",
                len(stopped),
            )
        for process in stopped:
            process.kill()
        # Their connections close as they end: the attempts they held are recorded as lost before the host exits,
        # or they would wait out their leases
        recorded_by = time.monotonic() + LOSS_RECORD_S
        for process in stopped:
            process.join(max(0.0, recorded_by - time.monotonic()))
        self._server.settle(max(0.0, recorded_by - time.monotonic()))
        self._release()
        self.metrics.close()
        if self._health is not None:
            self._health.remove(os.getpid())
        log.info("worker host stopped")

    def stop(self) -> None:
        """Drain (as the first SIGTERM does); a second call stops the running tasks too."""
        self._on_stop_signal()

    def _release(self) -> None:
        """Stop serving NextWork and remove the socket's directory: every host that stopped left one in the
        temporary directory (a thousand a day on a machine that runs the tests)."""
        self._server.close()
        self._socket_directory.remove()


def _start_fork_server() -> None:
    """Start the executors' fork server with the stop signals ignored, which it inherits across its exec: a Ctrl-C
    to the process group while its interpreter starts and imports atf_sdk.worker.preload had ended it with a
    KeyboardInterrupt, and the host with it. The host's own stay blocked meanwhile, so one sent to it then is
    kept pending (Linux keeps a blocked signal even while it is ignored) and reaches its handlers after."""
    if threading.current_thread() is not threading.main_thread():  # a host embedded in a thread: no handlers
        multiprocessing.forkserver.ensure_running()
        return
    with stop_signals_held():
        handlers = ignore_stop_signals()
        try:
            multiprocessing.forkserver.ensure_running()
        finally:
            for stop_signal, handler in handlers.items():
                signal.signal(stop_signal, handler)


def served_lambdas(settings: HostSettings, config: StackConfig) -> list[str]:
    """The lambdas a host serves: those registered that the stack knows, narrowed by `only`."""
    try:
        registered = load_lambdas(settings.lambdas_spec).names
    except Exception as error:  # whatever the module raises as it imports: one line, not a traceback
        raise LambdasMisnamed(f"cannot load the lambdas {settings.lambdas_spec}: {_one_line(error)}") from error
    unknown = [n for n in settings.only if n not in registered]
    if unknown:
        raise LambdasMisnamed(
            f"{settings.only_from} {', '.join(unknown)}: not registered in {settings.lambdas_spec}"
            f" (it registers {', '.join(registered) or 'nothing'})"
        )
    outside = [n for n in settings.only if n not in config.lambdas]
    if outside:
        raise LambdasMisnamed(
            f"{settings.only_from} {', '.join(outside)}: not a lambda of stack {config.name}"
            f" (its lambdas: {', '.join(config.lambdas) or 'none'})"
        )
    served = [n for n in registered if n in config.lambdas and (not settings.only or n in settings.only)]
    _warn_of_unknown(settings, config, registered)
    if not served:
        raise LambdasMisnamed(
            f"none of the lambdas {settings.lambdas_spec} registers ({', '.join(registered) or 'none'})"
            f" is a lambda of stack {config.name} ({', '.join(config.lambdas) or 'none'})"
        )
    return served


def _warn_of_unknown(settings: HostSettings, config: StackConfig, registered: list[str]) -> None:
    """Say which registered lambdas the stack does not know: the host serves the others, and a misspelt or
    undeployed lambda would otherwise just never run. With `only` the choice was made, so nothing is said."""
    unknown = [n for n in registered if n not in config.lambdas]
    if unknown and not settings.only:
        log.warning(
            "%s registers %s, not lambdas of stack %s (its lambdas: %s): not served",
            settings.lambdas_spec,
            ", ".join(unknown),
            config.name,
            ", ".join(config.lambdas) or "none",
        )


def _listen(
    controller: Controller, authkey: bytes, lost: Callable[[Task, str, float], None]
) -> tuple[NextWorkServer, SocketDirectory]:
    """The server its executors ask for work on, on a Unix socket in a directory of its own under TMPDIR."""
    where = tempfile.gettempdir()
    remove_abandoned(Path(where))
    try:
        directory = SocketDirectory()
    except OSError as error:
        raise HostError(f"cannot make a directory in TMPDIR {where}: {_one_line(error)}") from error
    address = str(directory.socket_path)
    try:
        return NextWorkServer(controller, address, authkey, lost), directory
    except OSError as error:
        directory.remove()
        limit = f" (at most {SOCKET_PATH_BYTES} bytes: set TMPDIR to a shorter directory)"
        too_long = len(os.fsencode(address)) > SOCKET_PATH_BYTES
        raise HostError(f"cannot listen on {address}: {_one_line(error)}{limit if too_long else ''}") from error


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
