"""The local stack with its API on free loopback ports, shared by the API tests.

Started once for this package, without a worker host or consumer, so task
states change only when a test changes them. The environment the stack sets
(endpoint, configuration) is restored afterwards so later packages see none of it.
Tests that need tasks to run use `live` (tests/api/live.py): a stack with a
consumer and a worker host, in processes of their own.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import urllib3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

from atf_core.aws import RETRY_CONFIG, make_clients
from atf_core.config import StackConfig
from atf_core.store.tasks import DynamoTaskStore
from atf_local.stack import LocalStack, free_port
from atf_sdk.client import AtfClient, RetryPolicy
from tests.api.live import live  # noqa: F401 - a fixture, shared with the package

API_CONFIG = {
    "name": "atf-api",
    "table_name": "atf-api-tasks",
    "shards": 2,
    "lookahead": 0.5,
    "timeouts": {"enqueue": 15, "claim": 10, "heartbeat_interval": 1, "heartbeat": 10},
    "lambdas": {
        "work": {"priorities": ["high", "normal", "low"], "default_priority": "normal", "max_attempts": 3},
        "mail": {"priorities": ["normal"], "default_priority": "normal", "max_attempts": 5, "shards": 1},
        # test_stats's own: it counts every task of the lambda
        "report": {"priorities": ["high", "low"], "default_priority": "low", "max_attempts": 3},
        # key_limits.singleton: tests/api/test_singleton_keys_api.py (no test runs its tasks)
        "single": {
            "priorities": ["normal"],
            "default_priority": "normal",
            "max_attempts": 3,
            "key_limits": {"singleton": True},
        },
        # key_limits.debounce: tests/api/test_debounce_keys_api.py (no test runs its tasks: they wait 5 minutes)
        "debounced": {
            "priorities": ["normal"],
            "default_priority": "normal",
            "max_attempts": 3,
            "key_limits": {"debounce": {"quiet_seconds": 300, "max_delay_seconds": 600}},
        },
        # test_tracing's own: it runs a consumer and a controller in this process, on this lambda alone
        "traced": {"priorities": ["normal"], "default_priority": "normal", "max_attempts": 3, "shards": 1},
        # dead letters (on by default), schedules and limits without a worker: the tests move its tasks
        "chore": {
            "priorities": ["high", "normal"],
            "default_priority": "normal",
            "max_attempts": 2,
            "limits": {"max_starts_per_second": 50, "max_running": 8},
            "collection_limits": {"bulk": {"max_running": 2}},
        },
    },
}
DUMMY = Credentials("local", "local")


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str]


class Raw:
    """Any request at all, signed like the SDK signs, for the cases the SDK would refuse to send."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._pool = urllib3.PoolManager()

    def __call__(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        data: bytes | None = None,
        content_type: str | None = "application/json",
        sign: bool = True,
        credentials: Credentials = DUMMY,
    ) -> Reply:
        if data is None and body is not None:
            data = json.dumps(body).encode()
        headers = {"Content-Type": content_type} if content_type else {}
        request = AWSRequest(method=method, url=self.url + path, data=data, headers=headers)
        if sign:
            SigV4Auth(credentials, "execute-api", "us-east-1").add_auth(request)
        response = self._pool.request(method, self.url + path, body=data, headers=dict(request.headers.items()))
        parsed = json.loads(response.data) if response.data else None
        return Reply(response.status, parsed, dict(response.headers))


@pytest.fixture(scope="package")
def stack() -> Iterator[LocalStack]:
    saved = dict(os.environ)
    os.environ.update(AWS_ACCESS_KEY_ID="local", AWS_SECRET_ACCESS_KEY="local", AWS_DEFAULT_REGION="us-east-1")
    os.environ.update({"POWERTOOLS_TRACE_DISABLED": "true", "POWERTOOLS_METRICS_DISABLED": "true"})
    try:  # the environment the stack sets is put back even if it does not start: the package's later tests'
        local = _started(StackConfig.model_validate(API_CONFIG))
        try:
            yield local
        finally:
            local.stop()
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _started(config: StackConfig, tries: int = 3) -> LocalStack:
    """A stack on free ports, started: a port another process took between free_port() and the bind (the
    kernel hands each process its ports alone) is given up for others."""
    attempt = 1
    while True:
        local = LocalStack(config, aws_port=free_port(), api_port=free_port())
        try:
            local.start(with_consumer=False)
            return local
        except OSError as error:
            if error.errno != errno.EADDRINUSE or attempt == tries:
                raise
        attempt += 1


@pytest.fixture(scope="package")
def client(stack: LocalStack) -> Iterator[AtfClient]:
    with AtfClient(stack.api_url, region="us-east-1", retry=RetryPolicy(attempts=3, base_s=0.05)) as atf:
        yield atf


@pytest.fixture(scope="package")
def raw(stack: LocalStack) -> Raw:
    return Raw(stack.api_url)


@pytest.fixture(scope="package")
def store(stack: LocalStack) -> DynamoTaskStore:
    return DynamoTaskStore(make_clients(stack.endpoint).dynamodb, stack.config)


@pytest.fixture(scope="package")
def _counting(stack: LocalStack) -> Any:
    # A whole-table scan of the package's shared stack (thousands of tasks by its later tests) can take moto
    # longer than the framework's 2 s read timeout on a busy machine.
    return make_clients(stack.endpoint, config=RETRY_CONFIG.merge(Config(read_timeout=60))).dynamodb


@pytest.fixture
def item_count(stack: LocalStack, _counting: Any) -> Any:
    """How many items the table holds (tasks and the gates item): to show a refusal wrote nothing. Read from
    DescribeTable's ItemCount, which moto counts from the table when asked (DynamoDB's lags by hours): a
    counting Scan made moto deep-copy every item of the shared table, twice a test (~20 s of a run's CPU).
    Each process checks it against a consistent Scan's count, page by page, until a count of some items."""
    table = stack.config.table_name

    def count() -> int:
        counted = int(_counting.describe_table(TableName=table)["Table"]["ItemCount"])
        if not _CHECKED:
            scanned = _scanned(_counting, table)
            assert counted == scanned, f"moto's ItemCount {counted}, a Scan's {scanned}"
            if scanned:  # an empty table would not show a count that never changes
                _CHECKED.append(table)
        return counted

    return count


_CHECKED: list[str] = []


def _scanned(dynamodb: Any, table: str) -> int:
    pages = dynamodb.get_paginator("scan").paginate(TableName=table, Select="COUNT", ConsistentRead=True)
    return sum(int(page["Count"]) for page in pages)
