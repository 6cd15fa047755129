"""Runs one scenario for real: a fresh local stack, its processes, the workload,
the faults; then waits for the backlog to drain, stops everything and checks."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from botocore.config import Config

from atf_core.aws import AwsClients, make_clients
from atf_core.config import StackConfig
from atf_core.schema import ScheduleRequest
from atf_core.store.scan import TaskScan
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling
from atf_local.environment import DUMMY_CREDENTIALS
from atf_local.faults.checker import TERMINAL, Bounds, Result, check_run
from atf_local.faults.injector import Injector
from atf_local.faults.processes import add_consumer, add_host
from atf_local.faults.procs import Cluster, python_argv
from atf_local.faults.spec import Scenario
from atf_local.faults.workload import Workload
from atf_local.iam.template import template_for
from atf_local.instruments.faults import Plan, install
from atf_local.instruments.history import History
from atf_local.stack import free_port, wait_for_port

log = logging.getLogger("atf.faults")
HARNESS_CONFIG = Config(retries={"mode": "standard", "max_attempts": 10}, connect_timeout=5, read_timeout=60)


@dataclass
class ScenarioRun:
    """A scenario's run, judged: the verdict, how long it took, where its history is."""

    scenario: Scenario
    result: Result
    seconds: float
    run_dir: Path


def run_scenario(scenario: Scenario, out_root: Path, seed: int = 1) -> ScenarioRun:
    """Run one scenario in out_root/NN-key and judge it. Its recipe (how it was built) is
    kept in run.json with the bounds, so `check` can judge the run again."""
    began = time.monotonic()
    for key, value in DUMMY_CREDENTIALS.items():
        os.environ.setdefault(key, value)  # the harness's own clients talk to the embedded AWS too
    run_dir = _fresh_dir(out_root / f"{scenario.number:02d}-{scenario.key}")
    config = StackConfig.model_validate(scenario.stack_config())
    (run_dir / "stack.json").write_text(json.dumps(scenario.stack_config(), indent=2))
    template_for(config)  # a first synthesis (tens of seconds) before the wait for the stack starts
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    history = History(run_dir / "history", "harness")
    cluster = Cluster(run_dir, endpoint, config.model_dump_json(), history)
    healed_t = drained_t = None
    try:
        argv = ["-m", "atf_local.faults.server", "--config", str(run_dir / "stack.json"), "--aws-port", str(port)]
        cluster.add("stack", "stack", python_argv(*argv), lambda _: {})
        clients = _ready(endpoint, port, config)
        healed_t, drained_t = _drive(scenario, cluster, clients, config, seed)
        _snapshot(clients, config, run_dir / "final.json")
    finally:
        try:
            cluster.stop_all()
        finally:
            # A second Ctrl-C or SIGTERM during stop_all's waits (up to 30 s a role) must not skip this: every
            # process has a session of its own, so nothing else would ever stop them.
            cluster.kill_leftovers()
    now = time.time()
    bounds = Bounds(healed_t or now, drained_t, now, scenario.drain_bound_s, scenario.watched)
    seconds = time.monotonic() - began
    run = {"recipe": scenario.recipe, "bounds": dataclasses.asdict(bounds), "seconds": seconds}
    (run_dir / "run.json").write_text(json.dumps(run, indent=2))
    return judge(scenario, run_dir, bounds, seconds)


def judge(scenario: Scenario, run_dir: Path, bounds: Bounds, seconds: float) -> ScenarioRun:
    """The checker's verdict on a run's history, with the scenario's own expectations."""
    result, records, final = check_run(run_dir, bounds)
    for expectation in scenario.expect:
        for message in expectation(result, records, final):
            result.violate(message)
    for target in scenario.targets:
        result.missed_targets += target(result, records, final)
    return ScenarioRun(scenario, result, seconds, run_dir)


def _drive(
    scenario: Scenario, cluster: Cluster, clients: AwsClients, config: StackConfig, seed: int
) -> tuple[float, float | None]:
    """Start the processes and the workload, inject, heal; returns (healed_t, drained_t)."""
    for consumer in scenario.consumers:
        add_consumer(cluster, consumer, seed)
    for host in scenario.hosts:
        add_host(cluster, host, seed)
    cluster.start_monitor()
    _warm_up(scenario, clients, config)
    window = cluster.run_dir / "flags" / "window"
    window.touch()  # the faults open now that the stack is warm
    started = time.time()
    cluster.history.record("phase", name="window open")
    faulty = _harness_clients(scenario, clients, seed, window)
    store = DynamoTaskStore(faulty.dynamodb, config)
    workload = Workload(Scheduling(store, config), cluster.history, scenario.loads, f"{scenario.key}-{int(started)}")
    workload.start()
    if scenario.inject is not None:
        scenario.inject(Injector(cluster, seed))
    workload.done.wait()
    time.sleep(max(0.0, started + scenario.fault_window_s - time.time()))
    window.unlink()
    healed_t = time.time()
    cluster.history.record("phase", name="healed")
    reader = DynamoTaskStore(clients.dynamodb, config)
    drained_t = _wait_drained(reader, workload.accepted, healed_t + scenario.drain_bound_s * 1.5 + 10)
    cluster.history.record("phase", name="drained" if drained_t else "not drained")
    return healed_t, drained_t


def _warm_up(scenario: Scenario, clients: AwsClients, config: StackConfig) -> None:
    """A few tasks of each lambda first, so start-lag measures the framework and not
    the executors' imports. They are not part of the workload (not "accepted")."""
    store = DynamoTaskStore(clients.dynamodb, config)
    scheduling = Scheduling(store, config)
    ids: list[str] = []
    for name in scenario.lambdas:
        if name == "poison":
            continue
        threads = sum(h.executors * h.threads for h in scenario.hosts if not h.only or name in h.only)
        request = ScheduleRequest.model_validate({"lambda": name, "payload": {"seconds": 0.3}})
        ids += [scheduling.schedule(request).task.id for _ in range(max(1, threads))]
    if _wait_drained(store, ids, time.time() + 120) is None:
        log.warning("warm-up tasks did not finish in 120 s; starting anyway")


def _harness_clients(scenario: Scenario, clients: AwsClients, seed: int, window: Path) -> AwsClients:
    if not scenario.harness_faults:
        return clients
    raw = {"seed": seed, "rules": [{**rule, "while_exists": str(window)} for rule in scenario.harness_faults]}
    faulty = make_clients(clients.dynamodb.meta.endpoint_url)  # the default config: faults must show
    install(faulty.dynamodb, "harness", Plan.from_json(json.dumps(raw)))
    return faulty


def _ready(endpoint: str, port: int, config: StackConfig) -> AwsClients:
    """The harness's own clients, patient: an overloaded embedded AWS must not end a run."""
    wait_for_port(port, timeout_s=60)
    clients = make_clients(endpoint, config=HARNESS_CONFIG)
    wanted = 2 * sum(len(spec.priorities) for spec in config.lambdas.values())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if len(clients.sqs.list_queues().get("QueueUrls", [])) >= wanted:
            return clients
        time.sleep(0.2)
    raise TimeoutError("the local stack did not provision its queues in 60 s")


def _wait_drained(store: DynamoTaskStore, accepted: list[str], deadline: float) -> float | None:
    """When every task has ended; None if some had not by the deadline. A task that
    ended is not read again (the checker verifies that final states stay final), so
    the harness adds little load to a busy embedded AWS."""
    pending = set(accepted)
    while time.time() < deadline:
        try:
            ended = {t.id for t in store.get_many(sorted(pending)) if t.status.value in TERMINAL}
        except Exception:
            log.warning("reading task states failed; trying again", exc_info=True)
            ended = set()
        pending -= ended
        if not pending:
            return time.time()
        time.sleep(1.0)
    return None


def _snapshot(clients: AwsClients, config: StackConfig, path: Path) -> None:
    tasks = [
        {"id": s.task.id, "lambda": s.task.lambda_, "status": s.task.status.value, "attempt": s.task.attempt,
         "max_attempts": s.task.max_attempts, "indexed": s.indexed}
        for s in TaskScan(clients.dynamodb, config.table_name).tasks()
    ]  # fmt: skip
    path.write_text(json.dumps({"t": time.time(), "tasks": tasks}))


def _fresh_dir(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    (path / "history").mkdir(parents=True)
    (path / "logs").mkdir()
    (path / "flags").mkdir()
    return path
