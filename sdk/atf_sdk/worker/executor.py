"""An executor: a process bound to one lambda, with several threads.

Each thread loops: ask the controller for work, run the callback while the
process heartbeats for it, report the result with a write fenced by the
attempt. The process exits when the controller says the host is draining,
once its running tasks are done.
"""

from __future__ import annotations

import atexit
import inspect
import logging
import os
import socket
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from multiprocessing.connection import Client
from typing import Any

from atf_core import lifecycle, tracing
from atf_core.aws import AwsClients, make_clients
from atf_core.clock import Clock, process_clock
from atf_core.config import StackConfig
from atf_core.schema import Task, TaskError, utcnow
from atf_core.store.base import Change, TaskStore
from atf_core.store.tasks import DynamoTaskStore
from atf_core.telemetry import LogLine, Metric, MetricBuffer, queue, watch_throttles
from atf_sdk.worker.async_callbacks import completed
from atf_sdk.worker.attempt_ends import AfterFinish, AttemptEnds, Recorded, after_finish, limits_and_chains
from atf_sdk.worker.heartbeat import Heartbeats, die
from atf_sdk.worker.observe import service_name, setup_logging, task_context, worker_metrics
from atf_sdk.worker.protocol import NextWork, Work
from atf_sdk.worker.registry import Callback, Fatal, Retry, TaskContext, load_lambdas
from atf_sdk.worker.results import result_json
from atf_sdk.worker.stop_signals import absorb_stop_signals
from atf_sdk.worker.time_limits import ASYNC_GRACE_S, RETRY_FLOOR_S, TaskTimeout, TimeLimits

log = logging.getLogger("atf.executor")


@dataclass(frozen=True)
class ExecutorSpec:
    lambda_name: str
    lambdas_spec: str  # "module:attribute" of the Lambdas registry
    address: str
    authkey: bytes
    threads: int
    config_json: str
    endpoint_url: str | None
    # The host's environment as it starts this executor. The executor forks from the host's fork server, whose
    # environment is the host's when the server started: a variable the host set or changed since (the metrics
    # switch, credentials, a test's settings) would otherwise not reach the executor or its callbacks.
    environ: dict[str, str]


def executor_main(spec: ExecutorSpec) -> None:
    """Entry point of an executor process."""
    # The host decides when to stop; a Ctrl-C or SIGTERM sent to the whole
    # process group must not cut a callback short.
    absorb_stop_signals()
    os.environ.clear()
    os.environ.update(spec.environ)
    try:
        _serve(spec)
    finally:
        # A forked multiprocessing child leaves through os._exit, which skips the atexit handlers a spawned one
        # ran as its interpreter ended: the callbacks' own (an OpenTelemetry provider's flush, a pool's close)
        # and the logging module's flush. They run here, once, as they did.
        atexit._run_exitfuncs()


def _serve(spec: ExecutorSpec) -> None:
    setup_logging()
    config = StackConfig.model_validate_json(spec.config_json)
    clients = make_clients(spec.endpoint_url)
    metrics = worker_metrics()
    for client in (clients.dynamodb, clients.dynamodb_heartbeat):
        watch_throttles(client, lambda _: metrics.count(Metric.THROTTLES))
    callback = load_lambdas(spec.lambdas_spec).get(spec.lambda_name)
    runner = build_runner(clients, config, spec.lambda_name, callback, metrics, process_clock)
    heartbeats = runner.heartbeats
    threading.Thread(target=heartbeats.run, daemon=True, name="heartbeat").start()
    threading.Thread(target=runner.time_limits.run, daemon=True, name="time-limits").start()
    workers = [
        threading.Thread(target=_work_loop, args=(spec, runner), name=f"executor-{i}") for i in range(spec.threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    heartbeats.stop()
    metrics.close()


def _work_loop(spec: ExecutorSpec, runner: TaskRunner) -> None:
    try:
        connection = Client(spec.address, family="AF_UNIX", authkey=spec.authkey)
    except OSError:
        return
    with connection:
        while True:
            try:
                connection.send(NextWork(spec.lambda_name, wait_s=1.0, worker=runner.worker))
                reply = connection.recv()
            except (EOFError, OSError):
                return  # the controller is gone: nothing more to do
            if isinstance(reply, Work):
                _run_one(runner, reply.task())
            elif reply.stop:
                return


def _run_one(runner: TaskRunner, task: Task) -> None:
    """An error escaping the runner (not the callback's: those are the attempt's outcome) costs this attempt,
    never the executor thread: the attempt is no longer heartbeated, so its lease lapses and it runs again."""
    try:
        runner.run(task)
    except Exception:
        log.exception("running %s attempt %d failed; it runs again once its lease lapses", task.id, task.attempt)
        runner.heartbeats.untrack(task)


def build_runner(
    clients: AwsClients,
    config: StackConfig,
    lambda_name: str,
    callback: Callback,
    metrics: MetricBuffer,
    clock: Clock,
    terminate: Callable[[str], None] = die,
) -> TaskRunner:
    """An executor's task runner as its process composes it: the results written through the main client, the
    heartbeats through their own, limit slots renewed with each beat and given back after, chains advanced."""
    store = DynamoTaskStore(clients.dynamodb, config)
    limiter, chains = limits_and_chains(store, clients.dynamodb, config, clock)
    heartbeats = Heartbeats(
        DynamoTaskStore(clients.dynamodb_heartbeat, config),
        config.timeouts,
        terminate=terminate,
        on_beat=lambda task: limiter.renew(limiter.grant_for(task.lambda_, task.collection, task.id, task.flow_key)),
        clock=clock,
    )
    runner = TaskRunner(store, config, lambda_name, callback, heartbeats, metrics, clock, after_finish(limiter, chains))
    runner.parent_results = chains.parent_results
    return runner


class TaskRunner:
    """Runs one task's callback and records how it ended."""

    def __init__(
        self,
        store: TaskStore,
        config: StackConfig,
        lambda_name: str,
        callback: Callback,
        heartbeats: Heartbeats,
        metrics: MetricBuffer | None = None,
        clock: Clock = utcnow,
        after_finish: AfterFinish | None = None,
    ) -> None:
        self._callback = callback
        self._lambda_spec = config.lambdas[lambda_name]
        self.heartbeats = heartbeats
        self._clock = clock
        self.worker = f"{socket.gethostname()}:{os.getpid()}"  # who runs the attempt, in its claim and errors
        self.metrics = metrics or MetricBuffer(service=service_name())
        self.ends = AttemptEnds(store, config, self.metrics, clock, after_finish)
        self._moved_on: set[tuple[str, int]] = set()  # (task id, attempt) whose result was refused
        self._moved_on_lock = threading.Lock()
        # A chain's link is given its parents' results: (chain id, task id) -> results by link name.
        self.parent_results: Callable[[str, str], dict[str, Any]] = lambda chain, task_id: {}
        # An attempt over its time limit is stopped by the watcher, once its executor runs it (executor_main);
        # a coroutine is cancelled at its limit first, and given a moment to unwind.
        self.time_limits = TimeLimits(self._overran)

    def run(self, task: Task) -> None:
        if not self.heartbeats.track(task):
            return  # its lease ran out before it got here: not started, it runs again once its claim times out
        with task_context(task):
            self._started(task)
            try:
                self._execute(task)
            finally:
                self._after(task)

    def _started(self, task: Task) -> None:
        dimensions = queue(task.lambda_, task.priority)
        self.metrics.count(Metric.STARTED, 1, dimensions)
        lag_ms = task.start_lag_ms
        if task.attempt == 1 and lag_ms is not None:  # once a task, at its first start
            self.metrics.observe(Metric.START_LAG_MS, lag_ms, "Milliseconds", dimensions)
        log.info(LogLine.TASK_STARTED)

    def _call(self, task: Task) -> Any:
        started = time.monotonic()
        limit_s = self._lambda_spec.time_limit(task.timeout_seconds)
        self.time_limits.start(task, limit_s)
        try:
            parents = self.parent_results(task.chain, task.id) if task.chain is not None else {}
            # Current while the callback runs, so the spans it makes are children of this attempt's.
            with tracing.span("atf execute", "CONSUMER", tracing.of_task(task), parent=task.traceparent):
                returned = self._callback(TaskContext.of(task, parents))
                if inspect.isawaitable(returned):  # an async def, or a decorated one: cancelled first, then ended
                    self.time_limits.extend(task.id, ASYNC_GRACE_S)
                return completed(returned, limit_s)
        finally:
            if not self.time_limits.end(task.id):
                self.time_limits.wait_for_the_end()
                raise _TakenOver  # the watcher recorded the timeout: this thread records nothing
            elapsed_ms = (time.monotonic() - started) * 1000
            self.metrics.observe(Metric.EXECUTION_MS, elapsed_ms, "Milliseconds", queue(task.lambda_, task.priority))

    def _after(self, task: Task) -> None:
        with self._moved_on_lock:
            moved_on = (task.id, task.attempt) in self._moved_on
            self._moved_on.discard((task.id, task.attempt))
        try:
            self.ends.after_finish(task, moved_on)
        except Exception:
            log.warning("after-finish work for %s failed", task.id, exc_info=True)

    def _execute(self, task: Task) -> None:
        try:
            result = result_json(self._call(task))  # a result JSON cannot keep fails the attempt
        except _TakenOver:
            return
        except Fatal as error:
            self._finish(task, self.ends.fatal(task), error)
        except Retry as error:
            self._retry(task, error, error.after)
        except Exception as error:  # noqa: BLE001 - any other exception is a retriable failure
            log.warning("task %s attempt %d raised:\n%s", task.id, task.attempt, traceback.format_exc())
            self._retry(task, error, None)
        except BaseException as error:
            # sys.exit() in a callback, or a CancelledError from its own awaits: a retriable failure too. Let
            # through, it ended this thread with the task still heartbeated: `processing` for as long as the
            # process lived, never run again. Only Ctrl-C goes on, once the attempt is recorded.
            log.warning("task %s attempt %d raised:\n%s", task.id, task.attempt, traceback.format_exc())
            self._retry(task, error, None)
            if isinstance(error, KeyboardInterrupt):
                raise
        else:
            self._finish(task, lifecycle.SUCCEED, None, result=result)

    def _overran(self, task: Task, limit_s: float) -> None:
        """The time-limit watcher's write for an attempt it stops (its process ends next). The task stays
        leased (heartbeated) until the write lands: if it cannot, the lease watchdog ends the process in time."""
        self._retry(task, TaskTimeout(limit_s), None, leased=True)

    def _retry(self, task: Task, error: BaseException, after: float | None, leased: bool = False) -> None:
        transition, delay = self.ends.failing(task, after, RETRY_FLOOR_S if leased else 0.0)
        self._finish(task, transition, error, delay, leased)

    def _finish(
        self,
        task: Task,
        transition: lifecycle.Transition,
        error: BaseException | None,
        delay: float = 0.0,
        leased: bool = False,
        result: str | None = None,
    ) -> None:
        # Stop heartbeating first: a heartbeat landing after the result would be refused, and a refused
        # heartbeat for a task still tracked ends the process (`leased`: what the caller wants next anyway).
        if not leased:
            self.heartbeats.untrack(task)
        now = self._clock()
        change = Change(
            now=now,
            attempt=task.attempt,
            next_at=now + timedelta(seconds=delay),
            error=_error_of(error, task.attempt, now, self.worker) if error else None,
            result=result,
        )
        try:
            if self.ends.record(task, transition, change) is Recorded.MOVED_ON:
                with self._moved_on_lock:
                    self._moved_on.add((task.id, task.attempt))
        finally:
            self.heartbeats.untrack(task)


class _TakenOver(Exception):
    """The attempt's callback returned after the time-limit watcher took the attempt over."""


def _error_of(error: BaseException, attempt: int, now: datetime, host: str) -> TaskError:
    return TaskError(type=type(error).__name__, message=_text_of(error), attempt=attempt, at=now, host=host)


def _text_of(error: BaseException) -> str:
    """An exception's message; its class's name where it has none, or where its __str__ itself raises (a
    team's exception class): the failure is recorded either way."""
    try:
        return str(error) or type(error).__name__
    except Exception:  # noqa: BLE001 - any error of a team's __str__
        return f"{type(error).__name__} (its message could not be read)"
