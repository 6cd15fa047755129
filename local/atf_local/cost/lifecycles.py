"""The lifecycles `atf cost` prices, run by the framework's own components on an embedded AWS.

Each lifecycle (happy path, retried twice, a 60-second task that heartbeats, a
gated task, a dropped task) schedules a batch of tasks through Scheduling,
polls the real Consumer, and hands what it sent to a real worker host's parts:
a Controller claims each message (reading the gates, handing a paused task
back, deleting messages ten at a time through its DeleteBatcher) and the
executor's TaskRunner, built by the same `build_runner` an executor process
uses, runs each task with a callback that succeeds, retries or heartbeats
through the real Heartbeats. So the writes priced are the ones those classes
make: they cannot drift from what a deployed stack does. Every call is metered
by atf_local.cost.billing on an in-process moto; time is simulated (every
component reads the lifecycle's clock), so the 60-second task takes
milliseconds.

Only receiving is done here rather than by the controller's long-poll loop:
full receives of ten, and no empty long poll (those are per host, not per task).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from atf_core.aws import AwsClients, make_clients
from atf_core.config import KeyLimits, StackConfig
from atf_core.consumer import Consumer
from atf_core.definitions import create_table_request, queue_specs
from atf_core.queues import TaskMessage
from atf_core.schema import Gate, GateAction, ScheduleRequest, Task
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling
from atf_core.telemetry import WORKER_SERVICE, MetricBuffer
from atf_local.cost.billing import CostMeter
from atf_local.cost.estimate import Estimate
from atf_local.environment import DUMMY_CREDENTIALS
from atf_sdk.worker.buffers import Buffered
from atf_sdk.worker.controller import Controller
from atf_sdk.worker.executor import TaskRunner, build_runner
from atf_sdk.worker.registry import Callback, Retry, TaskContext

T0 = datetime.fromisoformat("2030-01-01T12:00:00+00:00")
SCENARIOS = (
    "happy path",
    "retried twice",
    "60 s with heartbeats",
    "gated, then resumed",
    "dropped by a gate",
    "flow key with key limits",
    "singleton flow key, replaced",
    "debounced flow key, merged",
)
# The key limits the keyed scenario prices (each task its own key, so none waits): what a cap per key costs.
PRICED_KEY_LIMITS = KeyLimits(max_running=1, max_starts_per_second=10)
# A singleton key: taking it is a transaction (2 units an item); replacing a waiting holder adds its cancel.
PRICED_SINGLETON = KeyLimits(singleton=True)
# A debounced key: the first task takes the key as a singleton's does; each later one of the burst is an amend.
PRICED_DEBOUNCE = KeyLimits.model_validate({"debounce": {"quiet_seconds": 1, "max_delay_seconds": 10}})


def succeed(task: TaskContext) -> None:
    return None


class Lifecycles:
    """Drives tasks through the framework's components on one metered, embedded AWS."""

    def __init__(self, config: StackConfig, clients: AwsClients, estimate: Estimate) -> None:
        self.config, self.estimate = config, estimate
        self.lambda_name = next(iter(config.lambdas))
        self.priority = config.lambdas[self.lambda_name].default_priority  # every task is scheduled at it
        self.clients = make_clients(endpoint_url=None)  # what the components use: metered
        self.meter = CostMeter(reader=clients.dynamodb)  # the reader is not metered
        for client in (self.clients.dynamodb, self.clients.dynamodb_heartbeat, self.clients.sqs):
            self.meter.attach(client)
        self.store = DynamoTaskStore(self.clients.dynamodb, config)
        self.admin = DynamoTaskStore(clients.dynamodb, config)  # gates: per gate, not per task
        self.now = T0
        self.consumer = Consumer(self.store, self.clients.sqs, config, clock=self.clock)
        self.steps: dict[str, float] = {}
        self.runner: TaskRunner  # the executor's runner of the round under way (see work)
        self._nested: list[float] = []  # write units of the steps inside the one under way

    def clock(self) -> datetime:
        return self.now

    # -- what each component does ---------------------------------------------
    def schedule(self, collection: str, keyed: bool = False, step: str = "schedule", **more: str) -> list[Task]:
        """The scenario's batch of tasks; `keyed`: each with a flow key of its own; `more`: request fields."""
        payload = {"blob": "x" * max(0, self.estimate.payload_bytes - 12)}
        request = {"lambda": self.lambda_name, "payload": payload, "collection": collection, **more}
        scheduling = Scheduling(self.store, self.config, self.clock)
        with self.step(step):
            requests = [
                ScheduleRequest.model_validate({**request, "flow_key": f"key-{i}"} if keyed else request)
                for i in range(self.estimate.batch)
            ]
            return [scheduling.schedule(r).task for r in requests]

    def limited_per_key(self, limits: KeyLimits = PRICED_KEY_LIMITS) -> None:
        """From now on, the lambda caps each flow key (`limits`), for every component."""
        spec = self.config.lambdas[self.lambda_name].model_copy(update={"key_limits": limits})
        self.config = self.config.model_copy(update={"lambdas": {**self.config.lambdas, self.lambda_name: spec}})
        self.consumer = Consumer(self.store, self.clients.sqs, self.config, clock=self.clock)

    def poll(self, label: str = "enqueue") -> None:
        self.advance(1.0)
        with self.step(label):
            self.consumer.poll()

    def work(self, callback: Callback = succeed, outcome: str = "succeed", claim_step: str = "claim") -> None:
        """A worker host's round: its controller claims what the queue holds, its executor runs each task
        claimed with `callback` (each on its own timeline from the claim: they run side by side)."""
        runner = self.runner = build_runner(
            self.clients, self.config, self.lambda_name, callback, _metrics(), self.clock, terminate=_lease_lost
        )
        with self._controller() as controller, self.step(claim_step):
            claimed = [
                task
                for item in self._receive(controller)
                if (task := controller.claim(self.lambda_name, item, runner.worker)) is not None
            ]
        claimed_at, finished_at = self.now, self.now
        for task in claimed:
            self.now = claimed_at
            with self.step(outcome):
                runner.run(task)
            finished_at = max(finished_at, self.now)
        self.now = finished_at

    def long_task(self, task: TaskContext) -> None:
        """A callback that runs for the estimate's task_seconds while its executor heartbeats."""
        interval = self.config.timeouts.heartbeat_interval
        for _ in range(int(self.estimate.task_seconds // interval)):
            self.advance(interval)
            with self.step("heartbeat"):
                self.runner.heartbeats.beat_all()

    def gate(self, action: GateAction | None, collection: str) -> None:
        if action is None:
            self.admin.delete_gate(self.lambda_name, collection)
        else:
            gate = Gate(lambda_=self.lambda_name, collection=collection, action=action, created_at=self.now)
            self.admin.put_gate(gate)

    # -- the worker host's parts ------------------------------------------------
    @contextmanager
    def _controller(self) -> Iterator[Controller]:
        controller = Controller(
            self.store,
            self.clients.sqs,
            self.clients.sqs_long_poll,
            self.config,
            [self.lambda_name],
            store_client=self.clients.dynamodb,
            metrics=_metrics(),
            clock=self.clock,
        )
        try:
            yield controller
        finally:
            controller.drain()  # its deletes go out

    def _receive(self, controller: Controller) -> list[Buffered]:
        url = controller.queue_url(self.lambda_name, self.priority)
        rank = self.config.lambdas[self.lambda_name].priorities.index(self.priority)
        received: list[Buffered] = []
        seq = itertools.count()
        while len(received) < self.estimate.batch:
            messages = self.clients.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
            if not messages:
                break
            for raw in messages:
                message = TaskMessage.decode(raw["Body"])
                received.append(Buffered(rank, message.due_ms, next(seq), message, url, raw["ReceiptHandle"]))
        return received

    # -- bookkeeping ----------------------------------------------------------
    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Write units per task of one step; a step inside another counts for itself only."""
        before = self.meter.snapshot().write_units
        self._nested.append(0.0)
        try:
            yield
        finally:
            inner = self._nested.pop()
            spent = self.meter.snapshot().write_units - before
            if self._nested:
                self._nested[-1] += spent
            own = (spent - inner) / self.estimate.batch
            self.steps[name] = self.steps.get(name, 0.0) + own


def _metrics() -> MetricBuffer:
    return MetricBuffer(service=WORKER_SERVICE)  # gathered, never flushed: nothing is emitted


def _lease_lost(reason: str) -> None:
    raise RuntimeError(f"a simulated executor lost its lease: {reason}")


def happy_path(run: Lifecycles) -> None:
    run.schedule("happy")
    run.poll()
    run.work()


def retried_twice(run: Lifecycles) -> None:
    run.schedule("retried")
    backoff = run.config.timeouts.backoff_max

    def fails(task: TaskContext) -> None:
        raise Retry("attempt fails on purpose", after=backoff)

    for _ in range(2):
        run.poll()
        run.work(fails, "fail_retriable")
        run.advance(backoff)
    run.poll()
    run.work()


def heartbeating(run: Lifecycles) -> None:
    run.schedule("long")
    run.poll()
    run.work(run.long_task)


def gated(run: Lifecycles) -> None:
    """Paused after the consumer enqueued it: the controller hands it back, the consumer
    enqueues it again once the gate lifts. (Paused before it is due costs nothing extra:
    the consumer's query filters the collection out.)"""
    run.schedule("gated")
    run.poll()
    run.gate(GateAction.PAUSE, "gated")
    run.work(claim_step="controller pause")
    run.poll("poll while paused")
    run.gate(None, "gated")
    run.poll("enqueue again")
    run.work()


def dropped(run: Lifecycles) -> None:
    run.schedule("dropped")
    run.gate(GateAction.DROP, "dropped")
    run.poll("drop")
    run.gate(None, "dropped")


def keyed(run: Lifecycles) -> None:
    """Tasks with flow keys under key limits: the controller takes a slot and a start per key, the
    executor gives the slot back (and would renew it with each heartbeat)."""
    run.limited_per_key()
    run.schedule("keyed", keyed=True)
    run.poll()
    run.work()


def singleton_replaced(run: Lifecycles) -> None:
    """Tasks on singleton keys (one each), then a second task per key replacing the first before it runs:
    each schedule reads the key's holder (and the holder's task) and takes the key in one transaction."""
    run.limited_per_key(PRICED_SINGLETON)
    run.schedule("singleton", keyed=True)
    run.schedule("singleton", keyed=True, step="replace", on_conflict="replace")
    run.poll()
    run.work()


def debounced_merged(run: Lifecycles) -> None:
    """Tasks on debounced keys (one each), then a second request per key merged into the first before it runs:
    each merge reads the key's holder and its task and amends the task (payload and run time) in one write."""
    run.limited_per_key(PRICED_DEBOUNCE)
    run.schedule("debounced", keyed=True)
    run.advance(0.5)  # the merge moves the run time (and the index entry) half a second later
    run.schedule("debounced", keyed=True, step="merge")
    run.advance(0.5)
    run.poll()  # a second after the merge: the quiet period is over
    run.work()


SCENARIO_RUNS: dict[str, Callable[[Lifecycles], None]] = dict(
    zip(
        SCENARIOS,
        (happy_path, retried_twice, heartbeating, gated, dropped, keyed, singleton_replaced, debounced_merged),
        strict=True,
    )
)


def run_lifecycles(config: StackConfig, estimate: Estimate, only: tuple[str, ...]) -> Iterator[tuple[str, Lifecycles]]:
    """Each scenario named, run on a fresh embedded AWS; yields its name and the run once it is over."""
    for name, scenario in SCENARIO_RUNS.items():
        if name in only:
            with embedded_aws(config) as clients:
                run = Lifecycles(config, clients, estimate)
                scenario(run)
                yield name, run


@contextmanager
def embedded_aws(config: StackConfig) -> Iterator[AwsClients]:
    try:
        from moto import mock_aws
    except ImportError as missing:  # pragma: no cover - a dependency of atf-local
        raise SystemExit("atf cost runs on an embedded AWS: pip install 'moto[dynamodb,sqs]'") from missing
    from atf_core.aws import ENDPOINT_ENV

    saved = {k: os.environ.pop(k, None) for k in (ENDPOINT_ENV,)}
    for key, value in DUMMY_CREDENTIALS.items():
        os.environ.setdefault(key, value)
    try:
        with mock_aws():
            clients = make_clients(endpoint_url=None)
            clients.dynamodb.create_table(**create_table_request(config))
            for spec in queue_specs(config):
                clients.sqs.create_queue(QueueName=spec.name)
            yield clients
    finally:
        os.environ.update({k: v for k, v in saved.items() if v is not None})
