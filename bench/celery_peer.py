"""The peer: Celery 5 with its SQS transport, the same no-op tasks, on the same embedded SQS.

Celery is the benchmark's requirement (bench/requirements.txt), not the framework's. Its workers run
as Celery runs them (`celery worker`, a prefork pool of 2 and a thread pool of 8), against the SQS
server of the local stack the throughput run used, each pool on a queue of its own. This process
sends the tasks as fast as Celery's producer does (one SendMessage a task, as `delay()` sends) while
the workers run; every worker process writes when each task ended (Celery's task_postrun signal), and
the steady rate is taken over those ends as for the framework (bench.throughput.steady_rate).

    python -m bench --only throughput     # the peer runs after the framework, on the same SQS
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from celery import Celery
from celery.signals import task_postrun

from atf_local.environment import DUMMY_CREDENTIALS, REPO

BROKER_ENV = "BENCH_CELERY_BROKER"  # sqs://key:secret@host:port of the embedded SQS
QUEUE_ENV = "BENCH_CELERY_QUEUE"
ENDS_ENV = "BENCH_CELERY_ENDS"  # the directory each worker process writes its tasks' end times to
POOLS = (("prefork", 2), ("threads", 8))
# Producers sending at once. One, as `delay()` in a loop: four sent faster than the pools took the
# tasks, the queue grew, and moto's SQS, whose calls cost time linear in a queue's depth, slowed the
# workers to a third (13/s against 35/s with one, in one session on this machine).
SENDERS = 1

app = Celery("bench-peer", broker=os.environ.get(BROKER_ENV, "memory://"))
# Long polling with no client-side wait after a receive, as kombu's SQS transport documents for relying on
# long polling: with its default polling_interval (1 s) the prefork pool ran one prefetch window (2 x 4
# messages) a second, 7.9/s, a setting and not Celery's speed.
TRANSPORT = {"region": DUMMY_CREDENTIALS["AWS_REGION"], "is_secure": False, "polling_interval": 0}
app.conf.update(
    broker_transport_options=TRANSPORT,
    task_default_queue=os.environ.get(QUEUE_ENV, "celery"),
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
)


@app.task(name="noop")
def noop(**payload: Any) -> None:
    return None


@task_postrun.connect
def _ended(**_: Any) -> None:
    ends = os.environ.get(ENDS_ENV)
    if ends:
        with (Path(ends) / f"{os.getpid()}.txt").open("a") as out:
            out.write(f"{time.time()}\n")


def broker_url(sqs_endpoint: str) -> str:
    """The embedded SQS as Celery's broker, under the operator's credentials (IAM is enforced there)."""
    host = sqs_endpoint.split("://", 1)[1].rstrip("/")
    return f"sqs://{DUMMY_CREDENTIALS['AWS_ACCESS_KEY_ID']}:{DUMMY_CREDENTIALS['AWS_SECRET_ACCESS_KEY']}@{host}"


def run_peer(sqs_endpoint: str, workdir: Path, tasks: int, timeout_s: float = 600) -> dict[str, Any]:
    """Each pool in turn: its workers started, `tasks` no-op tasks sent, their ends timed."""
    return {f"{pool} {size}": run_pool(sqs_endpoint, workdir / f"{pool}-{size}", pool, size, tasks, timeout_s)
            for pool, size in POOLS}  # fmt: skip


def run_pool(sqs_endpoint: str, workdir: Path, pool: str, size: int, tasks: int, timeout_s: float) -> dict[str, Any]:
    from bench.throughput import steady_rate

    ends_dir = workdir / "ends"
    ends_dir.mkdir(parents=True, exist_ok=True)
    queue = f"celery-peer-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, **DUMMY_CREDENTIALS, BROKER_ENV: broker_url(sqs_endpoint), QUEUE_ENV: queue}
    env[ENDS_ENV] = str(ends_dir)
    worker = _start_worker(env, pool, size, workdir / "worker.log")
    try:
        sender = _sender(env)
        _warm_up(sender, ends_dir, timeout_s=120)
        first = time.time()
        _send(sender, tasks)
        sent = time.time()
        ends = _wait_for_ends(ends_dir, tasks, first, timeout_s)
    finally:
        _stop(worker)
    return {
        "pool": pool,
        "concurrency": size,
        "versions": _versions(),
        "transport_options": {k: v for k, v in TRANSPORT.items() if k not in ("region", "is_secure")},
        "tasks": tasks,
        "completed": len(ends),
        "seconds": (ends[-1] - first) if ends else None,
        "tasks_per_s": len(ends) / (ends[-1] - first) if ends else 0.0,
        "sending_per_s": tasks / max(1e-9, sent - first),
        "steady_per_s": steady_rate(ends),
    }


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in ("celery", "kombu")}


def _start_worker(env: dict[str, str], pool: str, size: int, log: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "celery", "-A", "bench.celery_peer:app", "worker", "--pool", pool,
               "--concurrency", str(size), "--without-gossip", "--without-mingle", "--without-heartbeat",
               "--loglevel", "WARNING"]  # fmt: skip
    with log.open("ab") as out:
        return subprocess.Popen(
            command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _sender(env: dict[str, str]) -> Any:
    """The no-op task bound to a Celery app of this process, configured as the workers' is."""
    sender = Celery("bench-peer-sender", broker=env[BROKER_ENV])
    sender.conf.update(app.conf)
    sender.conf.update(broker_url=env[BROKER_ENV], task_default_queue=env[QUEUE_ENV])
    return sender.signature("noop", app=sender)


def _send(sender: Any, tasks: int, producers: int = SENDERS) -> None:
    """`tasks` no-op tasks from `producers` threads, each with its own connection (kombu's are not shared)."""

    def produce(count: int) -> None:
        with sender.app.connection_for_write() as connection, connection.Producer() as producer:
            for _ in range(count):
                sender.apply_async(kwargs={}, producer=producer)

    shares = [tasks // producers + (1 if i < tasks % producers else 0) for i in range(producers)]
    with ThreadPoolExecutor(producers) as pool:
        list(pool.map(produce, shares))


def _warm_up(sender: Any, ends_dir: Path, timeout_s: float) -> None:
    """One task through, so the workers are connected before the clock starts; its end is left out."""
    sender.apply_async(kwargs={})
    _wait_for_ends(ends_dir, 1, 0.0, timeout_s)
    for path in ends_dir.glob("*.txt"):
        path.unlink()


def _wait_for_ends(ends_dir: Path, tasks: int, since: float, timeout_s: float) -> list[float]:
    deadline = time.monotonic() + timeout_s
    while True:
        ends = sorted(t for t in _ends(ends_dir) if t >= since)
        if len(ends) >= tasks or time.monotonic() > deadline:
            return ends
        time.sleep(0.2)


def _ends(ends_dir: Path) -> list[float]:
    found = []
    for path in ends_dir.glob("*.txt"):
        found += [float(line) for line in path.read_text().split() if line]
    return found


def _stop(worker: subprocess.Popen[bytes]) -> None:
    """Celery's warm shutdown (SIGTERM), then the whole group killed."""
    try:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    try:
        os.killpg(worker.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    worker.wait(timeout=10)
