"""atf cost: what a task costs on AWS, measured by running the framework's own code.

    atf cost --config stack.json [--payload-bytes 200] [--rate 100] [--tasks-per-request 100] [--json]

Each lifecycle below (happy path, retried twice, a 60-second task that
heartbeats, a gated task, a dropped task) runs through the real store,
consumer and lifecycle transitions on an embedded in-process AWS (moto),
with every call billed by atf_core.billing's rules. A task's bill is a
function of the code, the stack's configuration and the payload size, not of
where it runs, so the figures hold for a deployed stack with the same
configuration; nothing is sent to a running stack. (The metered benchmarks
under bench/ measure SQS requests per task under load, where batches fill
less than here.)

The controller's and the executor's writes are made through the same store
calls, with the same arguments, as Controller._claim, DeleteBatcher,
TaskRunner._finish and Heartbeats._beat make them; time is simulated, so the
60-second task takes milliseconds. What the consumer and controllers read
each poll does not grow with tasks: it is reported as a fixed cost per
second, spread over --rate tasks/s.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from atf_core import lifecycle
from atf_core.aws import AwsClients, make_clients
from atf_core.billing import Bill, CostMeter, Price, lambda_dollars, peer_costs
from atf_core.config import StackConfig
from atf_core.consumer import Consumer
from atf_core.gating import hand_back
from atf_core.queues import QueueDirectory, TaskMessage
from atf_core.scheduling import Scheduling
from atf_core.schema import Gate, GateAction, ScheduleRequest, Task
from atf_core.store.base import Change, TaskRef
from atf_core.store.tasks import DynamoTaskStore

if TYPE_CHECKING:
    from rich.console import Console

T0 = datetime.fromisoformat("2030-01-01T12:00:00+00:00")
POLL_OVERHEAD = ("dynamodb.Query/", "dynamodb.GetItem/", "sqs.GetQueueAttributes/", "sqs.GetQueueUrl/")
SCENARIOS = ("happy path", "retried twice", "60 s with heartbeats", "gated, then resumed", "dropped by a gate")


@dataclass(frozen=True)
class Estimate:
    """Assumptions for what the embedded run cannot see."""

    payload_bytes: int = 200
    batch: int = 10  # tasks per scenario: 10 fills every SQS batch
    rate: float = 100.0  # tasks/s, to spread fixed costs
    tasks_per_request: int = 1  # API requests carry 1 task, or up to 100 with the batch route
    frontend_ms: float = 25.0  # assumed frontend Lambda duration per request
    frontend_mb: int = 512
    consumer_mb: int = 512
    consumer_groups: int = 1
    task_seconds: float = 60.0  # the heartbeating scenario's callback


@dataclass
class ScenarioCost:
    name: str
    tasks: int
    write_units: float
    index_units: float
    read_units: float
    sqs_requests: float
    steps: dict[str, float] = field(default_factory=dict)  # write units per task of each step

    @property
    def dollars_per_million(self) -> float:
        return (
            self.write_units * Price.DYNAMODB_WRITE_UNITS
            + self.read_units * Price.DYNAMODB_READ_UNITS
            + self.sqs_requests * Price.SQS_REQUESTS
        )


@dataclass
class CostReport:
    config_name: str
    estimate: Estimate
    scenarios: list[ScenarioCost]
    fixed_per_second: dict[str, float]  # dollars per second that do not grow with tasks
    frontend_per_million: dict[str, float]
    peers: list[dict[str, Any]]

    def fixed_per_million(self) -> float:
        return sum(self.fixed_per_second.values()) / max(self.estimate.rate, 1e-9) * 1e6

    def all_in_per_million(self, scenario: ScenarioCost) -> float:
        return scenario.dollars_per_million + sum(self.frontend_per_million.values()) + self.fixed_per_million()

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config_name,
            "estimate": asdict(self.estimate),
            "scenarios": [
                {**asdict(s), "dollars_per_million": s.dollars_per_million, "all_in": self.all_in_per_million(s)}
                for s in self.scenarios
            ],
            "fixed_dollars_per_second": self.fixed_per_second,
            "fixed_dollars_per_million_at_rate": self.fixed_per_million(),
            "frontend_dollars_per_million": self.frontend_per_million,
            "peers": self.peers,
        }


class Lifecycles:
    """Drives tasks through the framework's writes on one metered, embedded AWS."""

    def __init__(self, config: StackConfig, clients: AwsClients, estimate: Estimate) -> None:
        self.config, self.estimate = config, estimate
        self.lambda_name = next(iter(config.lambdas))
        self.priority = config.lambdas[self.lambda_name].default_priority  # every task is scheduled at it
        metered = make_clients(endpoint_url=None)
        self.meter = CostMeter(reader=clients.dynamodb)  # the reader is not metered
        for client in (metered.dynamodb, metered.sqs):
            self.meter.attach(client)
        self.store = DynamoTaskStore(metered.dynamodb, config)
        self.admin = DynamoTaskStore(clients.dynamodb, config)  # gates: per gate, not per task
        self.sqs = metered.sqs
        self.now = T0
        self.consumer = Consumer(self.store, metered.sqs, config, clock=lambda: self.now)
        self.queues = QueueDirectory(metered.sqs, config)
        self.steps: dict[str, float] = {}

    # -- what each component does ---------------------------------------------
    def schedule(self, collection: str) -> list[Task]:
        payload = {"blob": "x" * max(0, self.estimate.payload_bytes - 12)}
        request = {"lambda": self.lambda_name, "payload": payload, "collection": collection}
        scheduling = Scheduling(self.store, self.config)
        with self.step("schedule"):
            requests = [ScheduleRequest.model_validate(request) for _ in range(self.estimate.batch)]
            return [scheduling.schedule(r, self.now).task for r in requests]

    def poll(self, label: str = "enqueue") -> None:
        self.advance(1.0)
        with self.step(label):
            self.consumer.poll()

    def receive(self) -> list[tuple[TaskMessage, str, str]]:
        """What the controller's receive loop gets under load: full receives of 10 from the queue
        every task here went to, and no empty long poll (those are per host, not per task)."""
        url = self.queues.url(self.lambda_name, self.priority)
        received: list[tuple[TaskMessage, str, str]] = []
        while len(received) < self.estimate.batch:
            messages = self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
            if not messages:
                break
            received += [(TaskMessage.decode(m["Body"]), url, m["ReceiptHandle"]) for m in messages]
        return received

    def claim(self, received: list[tuple[TaskMessage, str, str]], gate: GateAction | None = None) -> list[Task]:
        """Controller._claim for each message (or its gate), then DeleteBatcher's deletes of ten."""
        claimed = []
        with self.step("claim" if gate is None else f"controller {gate.value}"):
            for message, _, _ in received:
                ref = TaskRef(message.task_id, self.lambda_name, self.priority)
                if gate is GateAction.PAUSE:
                    hand_back(self.store, self.config, ref, message.attempt, self.now)
                    continue
                change = Change(now=self.now, attempt=message.attempt, entry_ms=message.due_ms)
                outcome = self.store.transition(ref, lifecycle.CLAIM, change)
                if outcome.applied and outcome.task is not None:
                    claimed.append(outcome.task)
            self._delete([(url, receipt) for _, url, receipt in received])
        return claimed

    def heartbeat(self, tasks: list[Task], entry_due: dict[str, datetime]) -> None:
        """Heartbeats._beat: a stamp, and a move of the index entry when it is due within half a timeout."""
        timeouts = self.config.timeouts
        self.advance(timeouts.heartbeat_interval)
        next_at = self.now + timedelta(seconds=timeouts.heartbeat)
        with self.step("heartbeat"):
            for task in tasks:
                moves = lifecycle.heartbeat_moves_entry(entry_due.get(task.id), self.now, timeouts.heartbeat)
                transition = lifecycle.HEARTBEAT if moves else lifecycle.HEARTBEAT_STAMP
                change = Change(now=self.now, attempt=task.attempt, next_at=next_at)
                if self.store.transition(TaskRef.of(task), transition, change).applied and moves:
                    entry_due[task.id] = next_at

    def finish(self, tasks: list[Task], transition: lifecycle.Transition, delay: float = 0.0) -> None:
        """TaskRunner._finish: one write fenced by the attempt."""
        from atf_core.schema import TaskError

        next_at = self.now + timedelta(seconds=delay)
        with self.step(transition.name):
            for task in tasks:
                error = (
                    None
                    if transition is lifecycle.SUCCEED
                    else TaskError(type="Retry", message="attempt fails on purpose", attempt=task.attempt, at=self.now)
                )
                change = Change(now=self.now, attempt=task.attempt, next_at=next_at, error=error)
                self.store.transition(TaskRef.of(task), transition, change)

    def gate(self, action: GateAction | None, collection: str) -> None:
        if action is None:
            self.admin.delete_gate(self.lambda_name, collection)
        else:
            gate = Gate(lambda_=self.lambda_name, collection=collection, action=action, created_at=self.now)
            self.admin.put_gate(gate)

    # -- bookkeeping ----------------------------------------------------------
    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        before = self.meter.snapshot()
        yield
        spent = self.meter.snapshot() - before
        self.steps[name] = self.steps.get(name, 0.0) + spent.write_units / self.estimate.batch

    def _delete(self, handles: list[tuple[str, str]]) -> None:
        for start in range(0, len(handles), 10):
            chunk = handles[start : start + 10]
            entries = [{"Id": str(i), "ReceiptHandle": receipt} for i, (_, receipt) in enumerate(chunk)]
            self.sqs.delete_message_batch(QueueUrl=chunk[0][0], Entries=entries)  # type: ignore[arg-type]


def happy_path(run: Lifecycles) -> None:
    run.schedule("happy")
    run.poll()
    run.finish(run.claim(run.receive()), lifecycle.SUCCEED)


def retried_twice(run: Lifecycles) -> None:
    run.schedule("retried")
    backoff = run.config.timeouts.backoff_max
    for _ in range(2):
        run.poll()
        run.finish(run.claim(run.receive()), lifecycle.FAIL_RETRIABLE, delay=backoff)
        run.advance(backoff)
    run.poll()
    run.finish(run.claim(run.receive()), lifecycle.SUCCEED)


def heartbeating(run: Lifecycles) -> None:
    run.schedule("long")
    run.poll()
    claimed = run.claim(run.receive())
    entry_due: dict[str, datetime] = {}
    for _ in range(int(run.estimate.task_seconds // run.config.timeouts.heartbeat_interval)):
        run.heartbeat(claimed, entry_due)
    run.finish(claimed, lifecycle.SUCCEED)


def gated(run: Lifecycles) -> None:
    """Paused after the consumer enqueued it: the controller hands it back, the consumer
    enqueues it again once the gate lifts. (Paused before it is due costs nothing extra:
    the consumer's query filters the collection out.)"""
    run.schedule("gated")
    run.poll()
    run.gate(GateAction.PAUSE, "gated")
    run.claim(run.receive(), gate=GateAction.PAUSE)
    run.poll("poll while paused")
    run.gate(None, "gated")
    run.poll("enqueue again")
    run.finish(run.claim(run.receive()), lifecycle.SUCCEED)


def dropped(run: Lifecycles) -> None:
    run.schedule("dropped")
    run.gate(GateAction.DROP, "dropped")
    run.poll("drop")
    run.gate(None, "dropped")


SCENARIO_RUNS: dict[str, Callable[[Lifecycles], None]] = dict(
    zip(SCENARIOS, (happy_path, retried_twice, heartbeating, gated, dropped), strict=True)
)


def measure(config: StackConfig, estimate: Estimate | None = None, only: tuple[str, ...] = SCENARIOS) -> CostReport:
    """Run every scenario (or those named) on a fresh embedded AWS and price it."""
    estimate = estimate or Estimate()
    scenarios = []
    for name, scenario in SCENARIO_RUNS.items():
        if name not in only:
            continue
        with _embedded_aws(config) as clients:
            run = Lifecycles(config, clients, estimate)
            scenario(run)
            scenarios.append(_per_task(name, run.meter.bill, run.steps, estimate.batch))
    return CostReport(
        config_name=config.name,
        estimate=estimate,
        scenarios=scenarios,
        fixed_per_second=fixed_costs(config, estimate),
        frontend_per_million=frontend_costs(estimate),
        peers=[asdict(p) for p in peer_costs()],
    )


def _per_task(name: str, bill: Bill, steps: dict[str, float], tasks: int) -> ScenarioCost:
    """Per-task units, leaving out what the consumer reads each poll whatever the load."""
    overhead = {k: v for k, v in bill.detail.items() if k.startswith(POLL_OVERHEAD)}
    reads = bill.read_units - sum(v for k, v in overhead.items() if k.endswith("/read_units"))
    sqs = bill.sqs_requests - sum(v for k, v in overhead.items() if k.endswith("/sqs_requests"))
    index = sum(v for k, v in bill.detail.items() if k.endswith("/index_units"))
    return ScenarioCost(
        name=name,
        tasks=tasks,
        write_units=bill.write_units / tasks,
        index_units=index / tasks,
        read_units=reads / tasks,
        sqs_requests=sqs / tasks,
        steps={k: round(v, 3) for k, v in steps.items() if v},
    )


def fixed_costs(config: StackConfig, estimate: Estimate) -> dict[str, float]:
    """Dollars per second that the polling design spends whatever the load."""
    queues = sum(len(spec.priorities) for spec in config.lambdas.values())
    partitions = sum(2 * config.shards_of(name) * len(spec.priorities) for name, spec in config.lambdas.items())
    polls_per_s = 1 / config.poll_interval
    # Each query reads at least one unit, halved (index reads are eventually consistent); the gates
    # item is read strongly once a poll; queue depths are refreshed every 2 s while sending.
    consumer_reads = polls_per_s * (0.5 * partitions + 1) * estimate.consumer_groups
    lambda_s = estimate.consumer_groups * estimate.consumer_mb / 1024
    return {
        "consumer Lambda (always running)": lambda_dollars(lambda_s, estimate.consumer_groups / 60),
        "consumer index queries and gate reads": consumer_reads * Price.DYNAMODB_READ_UNITS / 1e6,
        "consumer queue-depth reads": queues / 2.0 * Price.SQS_REQUESTS / 1e6,
    }


def frontend_costs(estimate: Estimate) -> dict[str, float]:
    per_task = 1 / max(1, estimate.tasks_per_request)
    gb_s = estimate.frontend_ms / 1000 * estimate.frontend_mb / 1024
    return {
        "API Gateway REST": per_task * Price.API_GATEWAY_REST,
        "frontend Lambda": lambda_dollars(gb_s * per_task * 1e6, per_task * 1e6),
    }


@contextmanager
def _embedded_aws(config: StackConfig) -> Iterator[AwsClients]:
    import os

    try:
        from moto import mock_aws
    except ImportError as missing:  # pragma: no cover - a dev dependency
        raise SystemExit("atf cost runs on an embedded AWS: pip install 'moto[dynamodb,sqs]'") from missing
    from atf_core.definitions import create_table_request, queue_specs

    saved = {k: os.environ.pop(k, None) for k in ("ATF_AWS_ENDPOINT",)}
    dummies = {"AWS_ACCESS_KEY_ID": "cost", "AWS_SECRET_ACCESS_KEY": "cost", "AWS_DEFAULT_REGION": "us-east-1"}
    for key, value in dummies.items():
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


# -- the verb ---------------------------------------------------------------------


def add_cost_command(subparsers: Any) -> argparse.ArgumentParser:
    verb: argparse.ArgumentParser = subparsers.add_parser(
        "cost", help="AWS cost per task for a stack configuration, measured on an embedded AWS"
    )
    verb.add_argument("--config", help="stack configuration file (default: $ATF_CONFIG, else the defaults)")
    verb.add_argument("--payload-bytes", type=int, default=Estimate.payload_bytes)
    verb.add_argument("--rate", type=float, default=Estimate.rate, help="tasks/s, to spread fixed costs over")
    verb.add_argument(
        "--tasks-per-request",
        type=int,
        default=Estimate.tasks_per_request,
        choices=range(1, 101),
        metavar="1..100",
        help="tasks per API request (the batch route takes 100)",
    )
    verb.add_argument("--frontend-ms", type=float, default=Estimate.frontend_ms, help="assumed frontend duration")
    verb.add_argument("--consumer-groups", type=int, default=Estimate.consumer_groups)
    verb.add_argument("--batch", type=int, default=Estimate.batch, help="tasks per lifecycle (10 fills SQS batches)")
    verb.add_argument("--json", action="store_true", help="print JSON instead of tables")
    verb.set_defaults(run=run_cost_command)
    return verb


def run_cost_command(args: argparse.Namespace) -> int:
    config = _config(args.config)
    estimate = Estimate(
        payload_bytes=args.payload_bytes,
        rate=args.rate,
        tasks_per_request=args.tasks_per_request,
        frontend_ms=args.frontend_ms,
        consumer_groups=args.consumer_groups,
        batch=args.batch,
    )
    report = measure(config, estimate)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        render(report)
    return 0


def _config(path: str | None) -> StackConfig:
    from pathlib import Path

    if path:
        return StackConfig.from_file(Path(path))
    try:
        return StackConfig.from_env()
    except RuntimeError:
        return StackConfig.model_validate({"lambdas": {"work": {}}})


def render(report: CostReport, console: Console | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console(highlight=False)
    est = report.estimate
    table = Table(title=f"AWS cost per task, stack {report.config_name!r}, {est.payload_bytes}-byte payload")
    for column in (
        "lifecycle",
        "write units",
        "of which index",
        "read units",
        "SQS requests",
        "DynamoDB+SQS $/M",
        "all-in $/M",
    ):
        table.add_column(column, justify="left" if column == "lifecycle" else "right")
    for s in report.scenarios:
        table.add_row(
            s.name,
            f"{s.write_units:.2f}",
            f"{s.index_units:.2f}",
            f"{s.read_units:.2f}",
            f"{s.sqs_requests:.2f}",
            f"{s.dollars_per_million:.2f}",
            f"{report.all_in_per_million(s):.2f}",
        )
    console.print(table)
    front = ", ".join(f"{k} ${v:.3f}/M" for k, v in report.frontend_per_million.items())
    console.print(
        f"all-in adds the frontend ({est.tasks_per_request} task(s) per request: {front}) and fixed "
        f"costs at {est.rate:g} tasks/s (${report.fixed_per_million():.3f}/M):"
    )
    for name, per_s in report.fixed_per_second.items():
        console.print(f"  {name}: ${per_s * 86400 * 30:.2f} a month")
    peers = Table("peer", "$/M tasks", "basis", title="The same million tasks elsewhere")
    for peer in report.peers:
        peers.add_row(peer["name"], f"{peer['dollars_per_million']:.2f}", peer["basis"])
    console.print(peers)
