"""Capacity model: what 10,000 and 100,000 tasks/s need on AWS, from its published limits.

Pure arithmetic plus a small simulation of the consumer's poll loop for the
start-lag the polling design yields. Every assumption is a field of
Assumptions, printed with the results, so the report can list them all.

And the worker services' scaling (infra/atf_cdk/constructs/scaling.py): how long a burst of tasks
due at one second waits for hosts when the service scales on its queues alone, against scaling on
the consumer's look-ahead metric as well (`burst_start_lag`, assumptions in BurstScaling).
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from atf_cdk.options import ConsumerSettings

from atf_core import sizing
from atf_core.config import MOST_QUEUE_PARTS, MOST_SHARDS
from atf_core.consumer.overlap import MAX_IO_THREADS
from atf_core.telemetry import percentile
from atf_local.cost.billing import Price

DOLLARS_ROW = "dollars per million tasks"  # kept to the cent where every other row is a whole number


@dataclass(frozen=True)
class Limits:
    """AWS's published limits (aws-facts.md)."""

    partition_write_units_s: int = sizing.PARTITION_WRITE_UNITS_S
    # Default quotas, raisable. The table-level quota bounds the base table and each of its GSIs separately,
    # not the table and its indexes together (DynamoDB developer guide, "Quotas in Amazon DynamoDB":
    # docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html).
    table_write_units_s: int = 40_000  # the base table's
    index_write_units_s: int = 40_000  # the due index's (a GSI)
    table_read_units_s: int = 40_000  # the base table's
    sqs_batch: int = 10
    sqs_in_flight_per_queue: int = sizing.SQS_IN_FLIGHT_PER_QUEUE
    lambda_max_s: int = 900
    eventbridge_min_rate_s: int = 60
    api_gateway_rps: int = 10_000
    lambda_concurrency: int = sizing.LAMBDA_ACCOUNT_CONCURRENCY  # default quota per account and region, raisable
    max_shards_per_lambda: int = MOST_SHARDS  # StackConfig's bound
    max_queue_parts: int = MOST_QUEUE_PARTS  # StackConfig's bound
    max_consumer_groups: int = sizing.most_consumer_groups()  # what the default concurrency leaves


@dataclass(frozen=True)
class Assumptions:
    """What the model takes as given; measured figures come from the benchmark run when it has them."""

    write_units_per_task: float = 5.0  # happy path, measured by the cost lifecycles (index units included)
    index_units_per_task: float = sizing.INDEX_WRITE_UNITS_PER_TASK  # add at create + remove at success
    # What a task writes once it is due (the rest, the Put and its index entry, was written at scheduling):
    base_units_after_due: float = 2.0  # on the base table: the claim (1) and the success (1)
    index_units_after_due: float = 1.0  # on the due index: the entry's removal at success
    sqs_requests_per_task: float = 0.5  # measured under load on the local stack
    headroom: float = sizing.HEADROOM  # plan partitions and CPUs at half their ceiling
    lambdas: int = 1  # the load is one hot (lambda, priority): the worst case for partitions
    consumer_mb: int = 1769  # one full vCPU per consumer invocation
    # The planning figure the CDK app sizes groups with (atf_core.sizing), not the bench's measurement:
    consumer_cpu_s_per_task: float = sizing.CONSUMER_CPU_S_PER_TASK
    consumer_cpu_s_measured: float | None = None  # the throughput step's consumer CPU / tasks, when run
    consumer_io_threads: int = MAX_IO_THREADS  # a poll's round trips overlap on these (consumer/overlap.py)
    worker_cpu_s_per_task: float = 0.011  # measured: controller + executor, no-op callback
    fargate_vcpus_per_host: int = 4
    # The consumer's store time per task: one BatchGetItem (about 10 ms) for up to 50 due tasks.
    # A consumer with record_enqueued makes one conditional UpdateItem (about 6 ms) per task instead.
    store_latency_s_per_task: float = 0.010 / 50
    send_latency_s: float = 0.010  # one SendMessageBatch
    query_latency_s: float = 0.010  # one index query page
    claim_latency_s: float = 0.010  # receive-to-claimed on a worker host
    poll_interval_s: float = 1.0
    lookahead_s: float = 1.0
    tasks_per_api_request: int = 100  # the batch route
    frontend_request_s: float = 0.08  # a batch of 100 puts with 16 writers
    read_units_per_task: float = 0.5  # the consumer's eventually consistent BatchGetItem


@dataclass
class Plan:
    rate: float
    rows: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def plan(rate: float, a: Assumptions | None = None, limits: Limits | None = None) -> Plan:
    a, limits = a or Assumptions(), limits or Limits()
    result = Plan(rate)
    _table(result, a, limits)
    _shards_and_consumers(result, a, limits)
    _queues(result, a, limits)
    _workers_and_frontend(result, a, limits)
    _concurrency(result, a, limits)
    result.rows[DOLLARS_ROW] = round(_dollars_per_million(result, a), 2)
    groups = min(result.rows["consumer groups"], limits.max_consumer_groups)
    lag = simulate_start_lag(rate / groups, a, limits)
    result.rows["start-lag with that many groups (ms)"] = {k: round(v * 1000) for k, v in lag.items()}
    return result


def _dollars_per_million(result: Plan, a: Assumptions) -> float:
    """On-demand list prices (local/atf_local/cost/billing.Price) of one million tasks at this plan's
    sizes: the table's units, SQS requests, API requests (batches), the consumer groups' and the frontend's
    Lambda time, and the worker hosts' Fargate vCPUs (2 GB each) at the plan's headroom."""
    rows, million = result.rows, 1_000_000
    seconds = million / result.rate  # how long a million tasks take at this rate
    consumer_gb_s = rows["consumer groups"] * a.consumer_mb / 1024 * seconds
    frontend_gb_s = rows["API requests/s"] * seconds * a.frontend_request_s * 0.5  # 512 MB functions
    worker_hours = rows["worker host vCPUs (framework only, no-op callbacks)"] * seconds / 3600
    return (
        a.write_units_per_task * Price.DYNAMODB_WRITE_UNITS
        + a.read_units_per_task * Price.DYNAMODB_READ_UNITS
        + a.sqs_requests_per_task * Price.SQS_REQUESTS
        + (Price.API_GATEWAY_REST + Price.LAMBDA_REQUESTS) / a.tasks_per_api_request
        + (consumer_gb_s + frontend_gb_s) * Price.LAMBDA_GB_SECOND_X86
        + worker_hours * (Price.FARGATE_VCPU_HOUR + 2 * Price.FARGATE_GB_HOUR)
    )


def _concurrency(result: Plan, a: Assumptions, limits: Limits) -> None:
    """Lambda executions: two reserved per consumer group, and the frontend's."""
    executions = 2 * result.rows["consumer groups"] + result.rows["frontend Lambda concurrency"]
    result.rows["Lambda concurrent executions"] = executions
    if executions > limits.lambda_concurrency - sizing.LAMBDA_UNRESERVED_FLOOR:
        result.notes.append(
            f"{executions:,} concurrent Lambda executions: raise the account's concurrency quota from its default "
            f"{limits.lambda_concurrency:,} (100 must stay unreserved), and set consumer.groups"
        )


def _table(result: Plan, a: Assumptions, limits: Limits) -> None:
    """The base table's writes, the due index's and the reads, each against its own quota."""
    prewarm = " (and pre-warm an on-demand table, which starts at 4,000 writes/s and doubles its peak)"
    for row, units, quota, where, advice in (
        ("base table write units/s", a.write_units_per_task - a.index_units_per_task, limits.table_write_units_s,
         "write units/s on the base table", prewarm),
        ("due index (GSI) write units/s", a.index_units_per_task, limits.index_write_units_s,
         "write units/s on the due index (a GSI)", prewarm),
        ("table read units/s", a.read_units_per_task, limits.table_read_units_s, "read units/s on the base table", ""),
    ):  # fmt: skip
        result.rows[row] = result.rate * units
        if result.rate * units > quota:
            result.notes.append(
                f"{result.rate * units:,.0f} {where} is over its default quota of {quota:,}: raise it{advice}"
            )


def _shards_and_consumers(result: Plan, a: Assumptions, limits: Limits) -> None:
    """Shards: enough for the index partitions' write limit, and at least one per consumer group
    (a group polls whole shards)."""
    per_queue = result.rate / a.lambdas
    by_partitions = math.ceil(per_queue * a.index_units_per_task / (limits.partition_write_units_s * a.headroom))
    by_cpu = sizing.group_rate(a.consumer_mb, a.consumer_cpu_s_per_task)  # what the CDK app deploys
    by_latency = a.consumer_io_threads / (a.store_latency_s_per_task + a.send_latency_s / limits.sqs_batch)
    per_group = min(by_cpu, by_latency)
    groups = max(1, math.ceil(result.rate / per_group))
    shards = max(by_partitions, math.ceil(groups / a.lambdas))
    result.rows["index shards per (lambda, priority)"] = shards
    result.rows["tasks/s one consumer group can enqueue"] = round(per_group)
    result.rows["consumer groups"] = groups
    if shards > limits.max_shards_per_lambda:
        result.notes.append(
            f"{shards} shards exceed the {limits.max_shards_per_lambda} a lambda may have: spread the load over "
            "more lambdas or priorities, or raise the bound"
        )
    if groups > limits.max_consumer_groups:
        result.notes.append(
            f"{groups} consumer groups needed, more than the {limits.max_consumer_groups} the infra allows: "
            "the consumer must do less per task or the bound must rise"
        )
    _memory_note(result, a, limits)


def _memory_note(result: Plan, a: Assumptions, limits: Limits) -> None:
    """The model's consumer memory is not the deployed default: say which setting makes them agree."""
    default = ConsumerSettings().memory_mib
    at_default = sizing.consumer_groups_for(result.rate, default, a.consumer_cpu_s_per_task)
    if at_default > result.rows["consumer groups"]:
        over = (
            f", more than the {limits.max_consumer_groups} the infra allows"
            if at_default > limits.max_consumer_groups
            else ""
        )
        result.notes.append(
            f"set consumer.memory_mib = {a.consumer_mb}: at its default {default} MiB the CDK app would need "
            f"{at_default:,} consumer groups for this rate{over}"
        )


def _queues(result: Plan, a: Assumptions, limits: Limits) -> None:
    per_queue = result.rate / a.lambdas
    # A message is in flight from the early enqueue (lookahead) until its delete, about a second later.
    in_flight = sizing.in_flight_for(per_queue, a.lookahead_s, a.poll_interval_s)
    parts = sizing.queue_parts_for(per_queue, a.lookahead_s, a.poll_interval_s)
    result.rows["SQS queues per (lambda, priority)"] = parts
    result.rows["SQS messages in flight per queue"] = math.ceil(in_flight / parts)
    result.rows["SQS requests/s"] = round(result.rate * a.sqs_requests_per_task)
    if parts > limits.max_queue_parts:
        result.notes.append(
            f"{parts} queues per (lambda, priority) exceed the {limits.max_queue_parts} a priority may be split "
            "over: shorten the lookahead or spread the load over more lambdas"
        )


def _workers_and_frontend(result: Plan, a: Assumptions, limits: Limits) -> None:
    cpus = result.rate * a.worker_cpu_s_per_task / a.headroom
    result.rows["worker host vCPUs (framework only, no-op callbacks)"] = math.ceil(cpus)
    result.rows["worker hosts"] = math.ceil(cpus / a.fargate_vcpus_per_host)
    requests = result.rate / a.tasks_per_api_request
    result.rows["API requests/s"] = round(requests)
    result.rows["frontend Lambda concurrency"] = math.ceil(requests * a.frontend_request_s)
    if requests > limits.api_gateway_rps:
        result.notes.append(f"{requests:,.0f} API requests/s exceed API Gateway's {limits.api_gateway_rps:,}/s")
    single = result.rate
    if single > limits.api_gateway_rps:
        result.notes.append(
            f"one task per request would be {single:,.0f} requests/s, over API Gateway's default "
            f"{limits.api_gateway_rps:,}/s: clients must use the batch route"
        )


def simulate_start_lag(
    rate: float, a: Assumptions, limits: Limits | None = None, seconds: float = 30.0, seed: int = 7
) -> dict[str, float]:
    """Start-lag of one consumer group's tasks under the poll loop, by simulation.

    Tasks fall due uniformly. A poll starts every poll_interval (or as soon as the
    previous one ends, if it ran longer), queries its shards, and reads and sends
    every task due by its start + lookahead; a task starts at the later of its due
    time and its send, plus the claim. A consumer slower than the
    rate falls behind for the whole window: its lag grows with `seconds`.
    """
    limits = limits or Limits()
    rng = random.Random(seed)
    dues = sorted(rng.uniform(0, seconds) for _ in range(int(rate * seconds)))
    per_task = max(
        (a.store_latency_s_per_task + a.send_latency_s / limits.sqs_batch) / a.consumer_io_threads,
        a.consumer_cpu_s_per_task / sizing.consumer_vcpus(a.consumer_mb),
    )
    lags, poll_at, index = [], 0.0, 0
    while index < len(dues):
        horizon = poll_at + a.lookahead_s
        finished = poll_at + a.query_latency_s
        while index < len(dues) and dues[index] <= horizon:
            finished += per_task
            lags.append(max(dues[index], finished + a.send_latency_s) + a.claim_latency_s - dues[index])
            index += 1
        poll_at = max(poll_at + a.poll_interval_s, finished)
    lags = lags or [0.0]
    return {q: percentile(lags, fraction) for q, fraction in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))} | {
        "max": max(lags)
    }


def recording(a: Assumptions) -> Assumptions:
    """The same stack with record_enqueued: one more write unit a task, and one conditional write per
    task in the consumer, one at a time (its CPU per task assumed 2.5 times as much: building, signing
    and parsing an UpdateItem per task was 62% of its samples when it wrote)."""
    return replace(
        a,
        write_units_per_task=a.write_units_per_task + 1,
        consumer_cpu_s_per_task=a.consumer_cpu_s_per_task * 2.5,
        store_latency_s_per_task=0.006,
    )


def tuned(a: Assumptions) -> Assumptions:
    """As built with half the lookahead and poll interval: fewer messages in flight on a hot queue."""
    return replace(a, lookahead_s=a.lookahead_s / 2, poll_interval_s=a.poll_interval_s / 2)


def model(rates: tuple[float, ...] = (10_000, 100_000), a: Assumptions | None = None) -> dict[str, Any]:
    a = a or Assumptions()
    designs = {"as built": a, "half lookahead and poll interval": tuned(a), "with record_enqueued": recording(a)}
    burst = BurstScaling()
    return {
        "limits": asdict(Limits()),
        "designs": {name: asdict(d) for name, d in designs.items()},
        "plans": {name: [asdict(plan(rate, d)) for rate in rates] for name, d in designs.items()},
        "burst": {"assumptions": asdict(burst), "start-lag": burst_start_lag(burst, a)},
        "million": all_due_at_once(1_000_000, plan(max(rates), a), a),
    }


def all_due_at_once(tasks: int, sized: Plan, a: Assumptions, limits: Limits | None = None) -> dict[str, Any]:
    """`tasks` due at the same second on a stack sized for `sized.rate` (its consumer groups, queue parts and
    worker hosts running): how long until the last one starts, and which stage sets the pace.

    The consumer sends up to `lookahead_s` early, so the first lookahead's worth is in the queues when the
    second comes; from then on the slowest stage drains the rest: the consumer groups' sends, the worker
    hosts' claims and starts, the table's quotas for what a task costs once due (on the base table its claim
    and success, on the due index its entry's removal, and the consumer's read), or SQS's in-flight cap over
    the lookahead and claim time."""
    limits = limits or Limits()
    rows = sized.rows
    stages = {
        # A burst runs the consumers and the hosts flat out (the plan keeps them at half), and the table at the
        # quotas the plan asks for (or the defaults, if higher); each quota is the base table's or the GSI's own.
        "consumer groups' sends": rows["consumer groups"]
        * sizing.consumer_vcpus(a.consumer_mb)
        / a.consumer_cpu_s_per_task,
        "worker hosts' starts": rows["worker host vCPUs (framework only, no-op callbacks)"] / a.worker_cpu_s_per_task,
        "base table's write quota": max(limits.table_write_units_s, rows["base table write units/s"])
        / a.base_units_after_due,
        "due index's write quota": max(limits.index_write_units_s, rows["due index (GSI) write units/s"])
        / a.index_units_after_due,
        "table's read quota": max(limits.table_read_units_s, rows["table read units/s"]) / a.read_units_per_task,
        "SQS in flight": rows["SQS queues per (lambda, priority)"]
        * limits.sqs_in_flight_per_queue
        / sizing.seconds_in_flight(a.lookahead_s, a.poll_interval_s),
    }
    pace, rate = min(stages.items(), key=lambda item: item[1])
    early = min(tasks, rate * a.lookahead_s)
    last = (tasks - early) / rate + a.claim_latency_s
    return {
        "tasks": tasks,
        "sized for (tasks/s)": sized.rate,
        "stage rates (tasks/s)": {name: round(value) for name, value in stages.items()},
        "paced by": pace,
        "last start after due (s)": round(last, 1),
        "p50 start after due (s)": round(max(0.0, (tasks / 2 - early) / rate) + a.claim_latency_s, 1),
    }


@dataclass(frozen=True)
class BurstScaling:
    """A worker service meeting a burst, and how fast it scales out.

    Without look-ahead the backlog appears in the queues as the tasks come due. SQS publishes its
    metrics to CloudWatch once a minute, and a target-tracking policy scales out after 3 one-minute
    data points above its target (Application Auto Scaling's scale-out alarm); then ECS starts the
    tasks. AWS puts a new Fargate task's start at "30-45 seconds or longer" (its own compute, an ENI
    in awsvpc mode, the image pulled and unpacked: AWS re:Post, "How to speed up provisioning of ECS
    Fargate task", pointing to the ECS best-practices guide's task-launch chapter); the model takes
    60 s for a Python image of a few hundred MB, an assumption to measure per image. With look-ahead
    the consumer counts the tasks due within `lookahead_s`, so the same chain runs that much earlier:
    when lookahead_s covers it, the hosts are up when the burst comes due.

    Per-host throughput: the lower of what its CPU allows (the bench's measured framework CPU per
    task, Assumptions.worker_cpu_s_per_task, at the plan's headroom) and its slots (executors x
    threads) over the callback's duration.
    """

    tasks: int = 10_000
    min_tasks: int = 1  # hosts running before the burst
    max_tasks: int = 20
    backlog_per_task: int = 100  # the scaling target: tasks queued, in flight or due, per host
    host_vcpus: float = 1.0  # cpu 1024
    slots_per_host: int = 8  # `atf worker` defaults: 2 executors x 4 threads
    callback_s: float = 1.0  # each task's own work
    metric_interval_s: float = 60.0  # SQS and the look-ahead metric: one data point a minute
    alarm_datapoints: int = 3  # target tracking's scale-out alarm: 3 of 3 one-minute points
    from_zero_datapoints: int = 1  # a service at zero starts on its own alarm's first point (ExactCapacity)
    fargate_start_s: float = 60.0  # PROVISIONING to RUNNING, image pulled
    lookahead_s: float = 300.0  # the consumer's look-ahead window for TasksDueSoon

    @property
    def reaction_s(self) -> float:
        """From the backlog existing to new hosts running: a metric point to publish it, the alarm's
        points, Fargate's start."""
        points = self.from_zero_datapoints if self.min_tasks == 0 else self.alarm_datapoints
        return self.metric_interval_s * (1 + points) + self.fargate_start_s


def host_rate(b: BurstScaling, a: Assumptions) -> float:
    by_cpu = b.host_vcpus * a.headroom / a.worker_cpu_s_per_task
    by_slots = b.slots_per_host / b.callback_s if b.callback_s > 0 else by_cpu
    return min(by_cpu, by_slots)


def burst_start_lag(b: BurstScaling | None = None, a: Assumptions | None = None) -> dict[str, Any]:
    """Start-lag of a burst of b.tasks due at one second, without and with the look-ahead metric."""
    b, a = b or BurstScaling(), a or Assumptions()
    rate = host_rate(b, a)
    hosts = min(b.max_tasks, max(b.min_tasks, math.ceil(b.tasks / b.backlog_per_task)))
    ready_without = b.reaction_s
    ready_with = max(0.0, b.reaction_s - b.lookahead_s)
    result: dict[str, Any] = {
        "per-host tasks/s": round(rate, 1),
        "hosts after scaling out": hosts,
        "scale-out reaction (s)": b.reaction_s,
    }
    for label, ready in (("without look-ahead", ready_without), ("with look-ahead", ready_with)):
        lags = _drain(b.tasks, b.min_tasks * rate, hosts * rate, ready)
        result[label] = {"hosts ready at (s)": ready, **{k: round(v, 1) for k, v in lags.items()}}
    result["p95 start-lag saved (s)"] = round(result["without look-ahead"]["p95"] - result["with look-ahead"]["p95"], 1)
    result["last start saved (s)"] = round(result["without look-ahead"]["max"] - result["with look-ahead"]["max"], 1)
    return result


def _drain(tasks: int, before: float, after: float, switch_s: float) -> dict[str, float]:
    """When each task starts, all due at 0: `before` tasks/s until `switch_s`, then `after` tasks/s."""
    early = min(tasks, before * switch_s)

    def start_of(n: float) -> float:  # the n-th task's start
        return n / before if 0 < n <= early else switch_s + (n - early) / after

    def pick(q: float) -> float:
        return start_of(math.ceil(q * tasks))

    return {"p50": pick(0.50), "p95": pick(0.95), "p99": pick(0.99), "max": pick(1.0)}
