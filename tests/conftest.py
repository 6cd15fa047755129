"""Fixtures shared by every tier: a stack configuration and an in-process moto store."""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import botocore.loaders
import botocore.session
import pytest
from xdist.scheduler import LoadFileScheduling

from atf_core.aws import AwsClients
from atf_core.config import StackConfig
from atf_local.environment import DUMMY_CREDENTIALS
from atf_local.iam.synth_service import IDLE_ENV
from atf_local.iam.template import synth_service
from tests.reused_clients import ReusedClients

# PYTHONDONTWRITEBYTECODE (set in some sandboxes and images) left each worker compiling the project's modules
# from source and pytest rewriting every test module's asserts anew, run after run: ~11 s of CPU for a worker's
# collection alone (~21 s instead of ~10 s). The run writes its bytecode caches as a developer's runs do; git and
# everything that copies the sources (the layer, the functions, the wheels) leave __pycache__ out, and Python
# checks each cache against its source. The processes the tests start read the caches (they do not write).
sys.dont_write_bytecode = False

# The local stack's operator (atf_local.iam.accounts): a test's own calls on a local stack run as it
for _name, _value in DUMMY_CREDENTIALS.items():
    os.environ.setdefault(_name, _value)
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
# The CLI sizes its tables by COLUMNS when set (atf_sdk.commands.support.console), and the runner's terminal is
# not the tests': pytest-xdist's workers export COLUMNS=80 and LINES=24, and a developer's shell may export them.
# Tests that print at a width set their own.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)
# Each boto3 session reads botocore's service models anew: ~0.12 s of CPU for the framework's four clients
# (atf_core.aws.make_clients), and the tests' processes make over a thousand sessions. Here they share one
# loader per data path, as the clients of one session do; the models are the same files.
botocore.session.create_loader = functools.cache(botocore.loaders.create_loader)  # type: ignore[attr-defined]

# The local stacks' templates come from one synthesis service (atf_local.iam.synth_service); a run asks it for a
# configuration every minute or so, and the session's end stops it.
os.environ.setdefault(IDLE_ENV, "600")


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # xdist's controller, or a run without xdist: the run's end
        synth_service().stop()


# The tiers whose modules run for minutes each (stacks of processes, real waits) are handed to the xdist workers
# first, and the many short modules fill in behind them: longest first is the greedy rule that balances two
# workers. xdist's own order (the Makefile turns it off: --no-loadscope-reorder) put modules with many tests
# first, so exactly these few-test, long modules started last and one ran alone at the end.
TESTS = Path(__file__).resolve().parent
# tests/infra goes out first: one work unit (below) of about five minutes, the longest.
LONG_TIERS = ("infra", "faults", "docs", "e2e", "console", "packaging")
ONE_UNIT_TIERS = ("infra",)


class _ModulesAndTiers(LoadFileScheduling):
    """`--dist loadfile`, except that each of ONE_UNIT_TIERS is one work unit: every tests/infra module reads the
    CDK app's environments that tests/infra/conftest.py synthesizes once per worker process (~45 s of CPU, most of
    it jsii's Node process), and spread over three workers the suite paid for that three times. (xdist's own
    `loadgroup` would do it with marks, but its nodeid suffix is lost on pytest 9.)"""

    def _split_scope(self, nodeid: str) -> str:
        module = super()._split_scope(nodeid)
        tier = _tier(TESTS.parent / module)
        return f"{TESTS.name}/{tier}" if tier in ONE_UNIT_TIERS else module


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadFileScheduling | None:
    return _ModulesAndTiers(config, log) if config.getvalue("dist") == "loadfile" else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_tier_rank)  # a stable sort: the modules of a tier, and each module's tests, keep their order


def _tier_rank(item: pytest.Item) -> int:
    tier = _tier(item.path)
    return LONG_TIERS.index(tier) if tier in LONG_TIERS else len(LONG_TIERS)


def _tier(path: Path) -> str | None:
    """The tier a test module belongs to: its folder under tests/ (None outside, as one named on the command
    line; xdist names modules relative to the root folder, where tests/ is)."""
    parts = path.relative_to(TESTS).parts if path.is_relative_to(TESTS) else ()
    return parts[0] if len(parts) > 1 else None


TEST_CONFIG = {
    "name": "atf-test",
    "table_name": "atf-test-tasks",
    "shards": 2,
    "poll_interval": 0.5,
    "lookahead": 0.5,
    "timeouts": {
        "enqueue": 15,
        "claim": 10,
        "heartbeat_interval": 1,
        "heartbeat": 10,
        "backoff_base": 0.5,
        "backoff_max": 2,
    },
    "lambdas": {
        "work": {
            "priorities": ["high", "normal", "low"],
            "default_priority": "normal",
            "max_attempts": 3,
            "dead_letter": False,
        },
        "sleepy": {"priorities": ["normal"], "default_priority": "normal", "max_attempts": 3},
    },
}


@pytest.fixture
def config() -> StackConfig:
    return StackConfig.model_validate(TEST_CONFIG)


def moto_session() -> boto3.Session:
    """The boto3 session for in-process moto's clients, one per region for the whole run: a session loads each
    service's model once (a new session per test spent about a second re-reading them). moto's mock hooks
    every botocore session created after moto is imported, and its state lives in moto's backends, reset by
    each mock_aws: clients made from it share nothing between tests but the parsed models."""
    from atf_core.aws import _default_region

    return _session(_default_region())


@functools.cache
def _session(region: str) -> boto3.Session:
    import moto  # noqa: F401 - before the session, so its clients carry moto's hook

    return boto3.Session(region_name=region)


@pytest.fixture
def aws(config: StackConfig, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """In-process moto with the table and queues: for sequential tests only
    (it has let two conditional writes both succeed under threads). Its clients are the previous test's when
    that test left them unchanged (tests/reused_clients.py); moto's state is new for each test."""
    from moto import mock_aws

    from atf_local.provision import provision

    monkeypatch.delenv("ATF_AWS_ENDPOINT", raising=False)  # never reach a server from here
    with mock_aws():
        clients = REUSED.take()
        provision(clients, config)
        yield clients
        REUSED.give_back(clients)


@pytest.fixture
def consumer_env(aws: Any, config: StackConfig, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The consumer Lambda's handler on in-process moto with the test configuration, its cached configuration,
    clients and consumers built anew (and dropped after); yields a task store on the same moto."""
    from atf_core.store.tasks import DynamoTaskStore
    from functions.consumer import handler

    monkeypatch.setenv("ATF_CONFIG", config.model_dump_json())
    cached = (handler._config, handler._clients, handler._consumer, handler._due_soon)
    for function in cached:
        function.cache_clear()
    handler.metrics.flush()
    yield DynamoTaskStore(aws.dynamodb, config)
    for function in cached:
        function.cache_clear()


def moto_clients() -> AwsClients:
    """The framework's four clients on in-process moto, refusing what DynamoDB refuses and moto does not."""
    from atf_core.aws import make_clients
    from tests.aws_rules import refuse_what_dynamodb_refuses

    clients = make_clients(endpoint_url=None, session=moto_session())
    for dynamodb in (clients.dynamodb, clients.dynamodb_heartbeat):
        refuse_what_dynamodb_refuses(dynamodb)
    return clients


# The `aws` fixture's clients, handed on to the next test unless a test changed them (tests/reused_clients.py)
REUSED = ReusedClients(moto_clients)


def without_aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """No credentials anywhere botocore looks for them (the environment, the shared files), until the test ends."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")


def interrupt_stack(process: subprocess.Popen[Any]) -> None:
    """Stop `atf_local serve` as Ctrl-C does. One that outstays 30 s fails the test, and its process group
    (started with start_new_session) is killed first, so no stack is left to slow the tests that follow."""
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        raise


@pytest.fixture
def drained(aws: object) -> Iterator[list[Any]]:
    """Controllers a test made, drained at its end while its AWS is still up. A dropped task's delete goes out
    from the controller's thread after a linger; left running, it failed (no such queue, once the mock was
    gone) and logged into a later test's captured lines."""
    made: list[Any] = []
    yield made
    for controller in made:
        controller.drain()


def work_controller(
    aws: Any, config: StackConfig, drained: list[Any], settings: Any = None, limits: bool = True
) -> tuple[Any, Any, Any]:
    """A controller of the `work` lambda on in-process moto (`aws`), with its store and metric buffer, drained at
    the test's end. Without `limits` it has no limiter (no table client for the counters)."""
    from atf_core.store.tasks import DynamoTaskStore
    from atf_core.telemetry import WORKER_SERVICE, MetricBuffer
    from atf_sdk.worker.controller import Controller, ControllerSettings

    store = DynamoTaskStore(aws.dynamodb, config)
    buffer = MetricBuffer(service=WORKER_SERVICE)
    # Its tests receive by hand, with no executor thread waiting: receives are not bounded by waiting threads
    settings = settings or ControllerSettings(gate_refresh_s=0, prefetch_per_lambda=None)
    counters_client = aws.dynamodb if limits else None
    controller = Controller(
        store, aws.sqs, aws.sqs, config, ["work"], settings, store_client=counters_client, metrics=buffer
    )
    drained.append(controller)
    return controller, store, buffer


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A directory with a short path, for a worker host's TMPDIR: its executors' Unix socket goes under it, and a
    socket's path holds 107 bytes at most (pytest's own temporary directories run longer)."""
    path = Path(tempfile.mkdtemp(prefix="atf-h-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)
