"""One consumer invocation's passes: 20,000 due tasks on 40 shards, sequential I/O against overlapped.

The embedded AWS (moto's server, in a process of its own so that this one's CPU
time is the consumer's) holds the tasks; one consumer polls until every task was
sent once, timing each pass and the CPU it took (its I/O threads included). The
consumer's default mode sends without writing, so the same tasks serve both runs:
"before" polls with one I/O thread (every call made in turn, as the consumer did
before its I/O overlapped), "after" with the threads the consumer derives from
the shard count. After each pass, outside the timing, the queue is made anew
and empty, as workers would empty it: moto's sends slow down with the depth
of the queue (past a few thousand messages, beyond the clients' 2 s timeout).
The sent tasks stay in the index, unclaimed, so each pass reads again what the
passes before sent (the tracker skips them), as a consumer does until workers
claim its tasks.

    python -m bench.consumer_passes --tasks 20000 --shards 40
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from atf_core.aws import AwsClients, make_clients
from atf_core.config import StackConfig
from atf_core.consumer import Consumer, Event
from atf_core.consumer.overlap import io_threads_for
from atf_core.queues import QueueDirectory
from atf_core.schema import ScheduleRequest
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling
from atf_local.environment import DUMMY_CREDENTIALS, REPO, local_environment, point_at
from atf_local.iam.template import template_for
from atf_local.provision import provision
from atf_local.stack import free_port, wait_for_port
from bench.machine import load_average

LAMBDA, PRIORITY = "noop", "normal"


def passes_config(tasks: int, shards: int, per_pass: int) -> StackConfig:
    """One lambda on `shards` shards; a queue bound above the run, so backpressure never stops a pass."""
    return StackConfig.model_validate(
        {
            "name": "bench",
            "table_name": "bench-passes",
            "shards": shards,
            "enqueue_per_poll": per_pass,
            "max_in_flight_per_queue": tasks + per_pass,
            "lambdas": {LAMBDA: {"priorities": [PRIORITY]}},
        }
    )


@contextmanager
def embedded_aws(config: StackConfig, workdir: Path) -> Iterator[AwsClients]:
    """The local stack's moto server without a consumer, in its own process group; its table and queues."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "stack.json"
    path.write_text(config.model_dump_json())
    template_for(config)  # the stack's IAM comes from a synthesis (tens of seconds, cached): before the port wait
    port = free_port()
    command = [sys.executable, "-m", "atf_local", "serve", "--config", str(path), "--aws-port", str(port)]
    command += ["--consumers", "0", "--api-port", "0", "--console-port", "0"]
    env = {**os.environ, **local_environment(f"http://127.0.0.1:{port}", config.model_dump_json())}
    with (workdir / "aws.log").open("wb") as log:
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=log, start_new_session=True)
    restore = None
    try:
        wait_for_port(port)
        restore = point_at(f"http://127.0.0.1:{port}")  # the passes call each service's server, as a consumer does
        clients = make_clients(f"http://127.0.0.1:{port}")
        _wait_for_queue(clients, config)
        yield clients
    finally:
        if restore is not None:
            restore()
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=30)


def _wait_for_queue(clients: AwsClients, config: StackConfig, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            QueueDirectory(clients.sqs, config).url(LAMBDA, PRIORITY)
            return
        except clients.sqs.exceptions.QueueDoesNotExist:
            time.sleep(0.2)
    raise TimeoutError("the embedded AWS did not provision its queue")


def fill(clients: AwsClients, config: StackConfig, tasks: int) -> float:
    """`tasks` no-op tasks due now, through the scheduling path; seconds it took."""
    scheduling = Scheduling(DynamoTaskStore(clients.dynamodb, config), config)
    request = ScheduleRequest.model_validate({"lambda": LAMBDA, "payload": {}})
    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:  # moto's server is the bound, not these round trips
        list(pool.map(lambda _: scheduling.schedule(request), range(tasks)))
    return time.monotonic() - started


def empty_queue(clients: AwsClients, config: StackConfig) -> None:
    """The queue made anew, empty (PurgeQueue allows one call a minute)."""
    clients.sqs.delete_queue(QueueUrl=QueueDirectory(clients.sqs, config).url(LAMBDA, PRIORITY))
    provision(clients, config)


def drain(clients: AwsClients, config: StackConfig, tasks: int, io_threads: int) -> dict[str, Any]:
    """One consumer polls until all `tasks` were sent; each pass's tasks, seconds and CPU seconds."""
    consumer = Consumer(DynamoTaskStore(clients.dynamodb, config), clients.sqs, config, io_threads=io_threads)
    passes: list[dict[str, float]] = []
    try:
        while sum(p["tasks"] for p in passes) < tasks:
            wall, cpu = time.perf_counter(), time.process_time()
            report = consumer.poll()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            passes.append({"tasks": report.total(Event.ENQUEUED), "seconds": wall, "cpu_s": cpu})
            if not report.total(Event.ENQUEUED) or report.total(Event.ERROR):
                raise RuntimeError(f"pass {len(passes)} sent nothing or failed: {dict(report.counts)}")
            empty_queue(clients, config)  # as workers would: moto's sends slow down with the queue's depth
    finally:
        consumer.close()
    sent, seconds, cpu_s = (sum(p[k] for p in passes) for k in ("tasks", "seconds", "cpu_s"))
    return {
        "io_threads": io_threads,
        "tasks": sent,
        "passes": passes,
        "tasks_per_s": sent / seconds,
        "cpu_ms_per_task": 1000 * cpu_s / sent,
        "cpu_share": cpu_s / seconds,  # of one core: how far the invocation is bound by its own CPU
    }


def run_consumer_passes(
    workdir: Path, tasks: int = 20_000, shards: int = 40, per_pass: int = 500, threads: int | None = None
) -> dict[str, Any]:
    config = passes_config(tasks, shards, per_pass)
    threads = threads or io_threads_for(config)
    with embedded_aws(config, workdir) as clients:
        fill_s = fill(clients, config, tasks)
        before = drain(clients, config, tasks, io_threads=1)
        after = drain(clients, config, tasks, io_threads=threads)
    return {
        "tasks": tasks,
        "shards": shards,
        "enqueue_per_poll": per_pass,
        "fill_s": fill_s,
        "before": before,
        "after": after,
        "speedup": after["tasks_per_s"] / before["tasks_per_s"],
        "load": load_average(),
    }


def summary(result: dict[str, Any]) -> str:
    lines = [f"{result['tasks']} due tasks on {result['shards']} shards, {result['enqueue_per_poll']} a pass:"]
    for name in ("before", "after"):
        run = result[name]
        lines.append(
            f"  {name:6} io_threads={run['io_threads']:2}  {len(run['passes'])} passes"
            f"  {run['tasks_per_s']:7.1f} tasks/s  {run['cpu_ms_per_task']:.2f} CPU ms/task"
            f"  ({100 * run['cpu_share']:.0f}% of a core)"
        )
    lines.append(f"  speedup x{result['speedup']:.2f}; load {result['load']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.consumer_passes", description=__doc__)
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--shards", type=int, default=40)
    parser.add_argument("--per-pass", type=int, default=500, help="enqueue_per_poll: the tasks one pass may send")
    parser.add_argument(
        "--threads", type=int, help="the I/O threads of the run after (default: as the consumer derives)"
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/atf-bench-consumer"))
    parser.add_argument("--json", type=Path, help="also write the figures there")
    args = parser.parse_args(argv)
    for key, value in DUMMY_CREDENTIALS.items():
        os.environ.setdefault(key, value)
    result = run_consumer_passes(args.work, args.tasks, args.shards, args.per_pass, args.threads)
    print(summary(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
