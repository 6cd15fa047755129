"""The fault hooks against the suite's embedded AWS: each kind does what botocore
would see on AWS, and botocore's own retries (standard mode) take it from there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from atf_core import lifecycle
from atf_core.aws import HEARTBEAT_CONFIG, RETRY_CONFIG, AwsClients, attempts, make_clients
from atf_core.config import StackConfig
from atf_core.schema import ScheduleRequest, TaskStatus, utcnow
from atf_core.store.base import Change, TaskRef
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling
from atf_local.environment import DUMMY_CREDENTIALS, REPO
from atf_local.instruments.faults import EXIT_CODE, FAULTS_ENV, Plan, install
from atf_local.instruments.history import HISTORY_ENV
from atf_local.instruments.startup import HOOK_DIR
from tests.conftest import TEST_CONFIG

CONFIG = StackConfig.model_validate(TEST_CONFIG)


def faulty(endpoint: str, *rules: dict[str, object]) -> AwsClients:
    clients = make_clients(endpoint)
    plan = Plan.from_json(json.dumps({"seed": 7, "rules": list(rules)}))
    install(clients.dynamodb, "dynamodb", plan)
    install(clients.sqs, "sqs", plan)
    return clients


def recorded_faults(directory: Path) -> list[str]:
    records = [json.loads(line) for path in directory.glob("faults-*.jsonl") for line in path.open()]
    return [r["fault"] for r in records if r["kind"] == "fault"]


@pytest.fixture(autouse=True)
def history_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(HISTORY_ENV, str(tmp_path / "history"))
    return tmp_path / "history"


def test_throttling_and_5xx_are_retried_by_botocore(endpoint: str, history_dir: Path) -> None:
    clients = faulty(endpoint, {"kind": "throttle", "operations": ["GetItem"], "nth": 1},
                     {"kind": "error5xx", "operations": ["GetItem"], "nth": 2})  # fmt: skip
    reply = clients.dynamodb.get_item(TableName=CONFIG.table_name, Key={"id": {"S": "nothing"}})
    assert reply["ResponseMetadata"]["RetryAttempts"] == 2
    assert sorted(recorded_faults(history_dir)) == ["error5xx", "throttle"]


@pytest.mark.parametrize("config", [RETRY_CONFIG, HEARTBEAT_CONFIG], ids=["calls", "heartbeats"])
def test_a_call_makes_no_more_attempts_than_its_retry_budget_counts(endpoint: str, config: Config) -> None:
    # The lease floor counts one heartbeat call as retry_budget_s: each of its attempts timing out, and the backoff
    client = make_clients(endpoint, config=config).dynamodb
    install(client, "dynamodb", Plan.from_json(json.dumps({"seed": 7, "rules": [{"kind": "throttle"}]})))
    with pytest.raises(ClientError) as throttled:
        client.get_item(TableName=CONFIG.table_name, Key={"id": {"S": "nothing"}})
    assert throttled.value.response["ResponseMetadata"]["RetryAttempts"] + 1 == attempts(config)


def test_a_lost_response_lands_and_the_retry_reconciles_through_the_writer_token(endpoint: str) -> None:
    task = (
        Scheduling(DynamoTaskStore(make_clients(endpoint).dynamodb, CONFIG), CONFIG)
        .schedule(ScheduleRequest.model_validate({"lambda": "work"}))
        .task
    )
    lost = faulty(endpoint, {"kind": "lost_response", "operations": ["UpdateItem"], "nth": 1})
    store = DynamoTaskStore(lost.dynamodb, CONFIG)
    outcome = store.transition(TaskRef.of(task), lifecycle.ENQUEUE, Change(now=utcnow()))
    # botocore retried after the "timeout"; the retry failed its condition and found its own token
    assert (outcome.applied, outcome.reconciled) == (True, True)
    stored = store.get(task.id)
    assert stored is not None and stored.status is TaskStatus.ENQUEUED


def test_a_duplicated_send_delivers_the_message_twice(endpoint: str) -> None:
    clients = faulty(endpoint, {"kind": "duplicate", "service": "sqs", "operations": ["SendMessage"], "nth": 1})
    url = clients.sqs.create_queue(QueueName="duplicates")["QueueUrl"]
    clients.sqs.send_message(QueueUrl=url, MessageBody="once")
    depth = clients.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    assert depth["Attributes"]["ApproximateNumberOfMessages"] == "2"


@pytest.mark.parametrize(("kind", "lands"), [("exit_before", False), ("exit_after", True)])
def test_an_exit_ends_the_process_before_or_after_the_call(
    endpoint: str, tmp_path: Path, kind: str, lands: bool
) -> None:
    rule = {"kind": kind, "operations": ["PutItem"], "nth": 1}
    script = (
        "from atf_core.aws import make_clients\n"
        f"make_clients({endpoint!r}).dynamodb.put_item(TableName={CONFIG.table_name!r}, "
        f"Item={{'id': {{'S': {kind!r}}}}})\n"
        "print('the call returned')\n"
    )
    env = {**os.environ, **DUMMY_CREDENTIALS, FAULTS_ENV: json.dumps({"rules": [rule]}),
           HISTORY_ENV: str(tmp_path / "exits"), "PYTHONPATH": str(HOOK_DIR)}  # the start-up hook  # fmt: skip
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=REPO, capture_output=True, timeout=60)
    assert done.returncode == EXIT_CODE and b"the call returned" not in done.stdout
    item = make_clients(endpoint).dynamodb.get_item(TableName=CONFIG.table_name, Key={"id": {"S": kind}})
    assert ("Item" in item) is lands
    assert recorded_faults(tmp_path / "exits") == [kind]  # and an "exit" record for the checker


def test_an_exit_after_counts_the_calls_that_succeeded_not_those_refused(endpoint: str, tmp_path: Path) -> None:
    # Given "exit after the first PutItem", and a first PutItem its condition refuses
    rule = {"kind": "exit_after", "operations": ["PutItem"], "nth": 1}
    script = (
        "from atf_core.aws import make_clients\n"
        f"dynamodb = make_clients({endpoint!r}).dynamodb\n"
        f"put = dict(TableName={CONFIG.table_name!r}, Item={{'id': {{'S': 'refused-then-made'}}}})\n"
        "try:\n"
        "    dynamodb.put_item(**put, ConditionExpression='attribute_exists(id)')\n"
        "except dynamodb.exceptions.ConditionalCheckFailedException:\n"
        "    print('refused, and still running', flush=True)\n"
        "dynamodb.put_item(**put)\n"
        "print('the second call returned')\n"
    )
    env = {**os.environ, **DUMMY_CREDENTIALS, FAULTS_ENV: json.dumps({"rules": [rule]}),
           HISTORY_ENV: str(tmp_path / "exits"), "PYTHONPATH": str(HOOK_DIR)}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=REPO, capture_output=True, timeout=60)
    # Then the process lives past the refusal and exits after the write that was made
    assert done.returncode == EXIT_CODE, done.stderr
    assert b"refused, and still running" in done.stdout and b"the second call returned" not in done.stdout
    assert recorded_faults(tmp_path / "exits") == ["exit_after"]
