"""The history recorded from the wire: every transition the store writes is read back as itself,
with how it ended, and the start-up hook attaches the instruments to a process from outside."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from atf_core import lifecycle
from atf_core.aws import AwsClients, make_clients
from atf_core.config import StackConfig
from atf_core.consumer.deadlines import observed_stamp
from atf_core.queues import TaskMessage
from atf_core.schema import LOST_EXECUTION, TaskError, TaskStatus
from atf_core.store.base import Change, TaskRef
from atf_core.store.tasks import DynamoTaskStore
from atf_local.environment import DUMMY_CREDENTIALS, REPO
from atf_local.faults.tail import HistoryTail
from atf_local.instruments.faults import Plan, install
from atf_local.instruments.history import HISTORY_ENV, History
from atf_local.instruments.startup import CLOCK_OFFSET_ENV, HOOK_DIR
from atf_local.instruments.wire import RECOVERIES, WireRecorder
from tests.functional.helpers import T0, force_status, new_task


def recorded(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted(directory.glob("*.jsonl")) for line in path.open()]


def recording(aws: AwsClients, directory: Path) -> AwsClients:
    """Clients of the in-process moto `aws` runs, with the recorder attached."""
    clients = make_clients(endpoint_url=None)
    recorder = WireRecorder(History(directory, "wire"))
    recorder.attach(clients.dynamodb)
    recorder.attach(clients.sqs)
    return clients


def change_for(transition: lifecycle.Transition, store: DynamoTaskStore, task_id: str) -> Change:
    task = store.get(task_id)
    assert task is not None
    return Change(
        now=T0,
        attempt=task.attempt if transition.fenced else None,
        next_at=T0 if transition.index is lifecycle.IndexEffect.MOVE else None,
        observed=observed_stamp(task) if transition.name in RECOVERIES else {},
    )


@pytest.mark.parametrize("transition", lifecycle.TRANSITIONS, ids=lambda t: t.name)
def test_every_transition_the_store_writes_is_recorded_as_itself(
    aws: AwsClients, config: StackConfig, tmp_path: Path, transition: lifecycle.Transition
) -> None:
    store = DynamoTaskStore(recording(aws, tmp_path).dynamodb, config)
    source = sorted(transition.sources)[0]
    task = force_status(store, new_task(store, config), source, attempt=1)
    change = change_for(transition, store, task.id)
    outcome = store.transition(TaskRef.of(task), transition, change)
    [write] = [r for r in recorded(tmp_path) if r["kind"] == "write"]
    assert (write["task"], write["transition"], write["writer"]) == (task.id, transition.name, change.writer)
    assert write["attempt"] == change.attempt
    assert write["result"] == ("applied" if outcome.applied else "rejected")
    assert outcome.task is not None and write["status"] == outcome.task.status.value
    assert write["current_attempt"] == outcome.task.attempt


def test_a_failure_is_recorded_with_its_error_type(aws: AwsClients, config: StackConfig, tmp_path: Path) -> None:
    # The checker tells a loss its host recorded (a fault's re-run) from a failure that asked for a retry
    store = DynamoTaskStore(recording(aws, tmp_path).dynamodb, config)
    task = force_status(store, new_task(store, config), TaskStatus.PROCESSING, attempt=1)
    lost = TaskError(type=LOST_EXECUTION, message="its executor died", attempt=1, at=T0)
    assert store.transition(
        TaskRef.of(task), lifecycle.FAIL_RETRIABLE, Change(now=T0, attempt=1, next_at=T0, error=lost)
    ).applied
    [write] = [r for r in recorded(tmp_path) if r["kind"] == "write"]
    assert (write["transition"], write["error_type"]) == ("fail_retriable", LOST_EXECUTION)


def test_a_refused_write_is_recorded_with_the_task_as_it_stood(
    aws: AwsClients, config: StackConfig, tmp_path: Path
) -> None:
    store = DynamoTaskStore(recording(aws, tmp_path).dynamodb, config)
    task = force_status(store, new_task(store, config), TaskStatus.PROCESSING, attempt=2)
    stale = Change(now=T0, attempt=1)  # an older attempt's result
    assert not store.transition(TaskRef.of(task), lifecycle.SUCCEED, stale).applied
    [write] = [r for r in recorded(tmp_path) if r["kind"] == "write"]
    assert (write["result"], write["attempt"], write["status"], write["current_attempt"]) == (
        "rejected",
        1,
        "processing",
        2,
    )
    assert write["reconciled"] is False


def test_sends_and_untracked_writes(aws: AwsClients, config: StackConfig, tmp_path: Path) -> None:
    clients = recording(aws, tmp_path)
    url = aws.sqs.list_queues()["QueueUrls"][0]
    entries = [{"Id": str(i), "MessageBody": TaskMessage(f"t{i}", i, 0, "default").encode()} for i in range(3)]
    clients.sqs.send_message_batch(QueueUrl=url, Entries=entries)  # type: ignore[arg-type]
    DynamoTaskStore(clients.dynamodb, config).delete_gate("work", None)  # an UpdateItem that moves no task
    assert [(r["kind"], r["task"], r["attempt"]) for r in recorded(tmp_path)] == [
        ("sent", "t0", 0),
        ("sent", "t1", 1),
        ("sent", "t2", 2),
    ]


@pytest.mark.stack
def test_a_write_that_botocore_gave_up_on_is_an_error_and_a_lost_response_reconciles(
    endpoint: str, tmp_path: Path
) -> None:
    from tests.faults.test_fault_hooks import CONFIG

    clients = make_clients(endpoint)
    plan = Plan.from_json(json.dumps({"rules": [
        {"kind": "throttle", "operations": ["UpdateItem"], "max": 3},  # all of the first call's attempts
        {"kind": "lost_response", "operations": ["UpdateItem"], "nth": 4},
    ]}))  # fmt: skip
    install(clients.dynamodb, "dynamodb", plan)
    WireRecorder(History(tmp_path, "wire")).attach(clients.dynamodb)  # after the faults, as the start-up hook does
    store = DynamoTaskStore(clients.dynamodb, CONFIG)
    task = new_task(DynamoTaskStore(make_clients(endpoint).dynamodb, CONFIG), CONFIG)
    with pytest.raises(Exception, match="Throttling"):
        store.transition(TaskRef.of(task), lifecycle.ENQUEUE, Change(now=T0))
    assert store.transition(TaskRef.of(task), lifecycle.ENQUEUE, Change(now=T0)).reconciled
    first, second = [r for r in recorded(tmp_path) if r["kind"] == "write"]
    assert (first["result"], first["error"]) == ("error", "ThrottlingException")
    assert (second["result"], second["reconciled"], second["status"]) == ("applied", True, "enqueued")


def test_an_execution_is_busy_until_its_end_and_its_own_result_are_recorded(tmp_path: Path) -> None:
    executions, wire = History(tmp_path, "executor"), History(tmp_path, "wire")
    tail = HistoryTail(tmp_path)
    pid = os.getpid()
    executions.record("start", task="a", attempt=1)
    executions.record("end", task="a", attempt=1)
    assert tail.busy_pids([pid]) == {pid: [("a", 1)]}, "its callback returned; its result is still being written"
    wire.record("write", task="a", transition="succeed", attempt=1, result="rejected")
    assert tail.busy_pids([pid]) == {}


def run_with_hook(program: str, env: dict[str, str]) -> str:
    environment = {**os.environ, **DUMMY_CREDENTIALS, "PYTHONPATH": str(HOOK_DIR), **env}
    done = subprocess.run(
        [sys.executable, "-c", program], env=environment, cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_start_up_hook_labels_each_client_as_the_framework_names_it(tmp_path: Path) -> None:
    program = (
        "from atf_local.instruments.startup import on_every_client\n"
        "from atf_core.aws import make_clients\n"
        "on_every_client(lambda client, label: print(label))\n"
        "make_clients('http://127.0.0.1:9')\n"
    )
    printed = run_with_hook(program, {HISTORY_ENV: str(tmp_path)})
    assert printed.split() == ["dynamodb", "sqs", "sqs_long_poll", "dynamodb_heartbeat"]


def test_the_start_up_hook_shifts_the_process_clock_and_nothing_else() -> None:
    program = (
        "from atf_core.clock import process_clock\n"
        "from atf_core.schema import utcnow\n"
        "print(round((process_clock() - utcnow()).total_seconds()))\n"
    )
    assert run_with_hook(program, {CLOCK_OFFSET_ENV: "-30"}).strip() == "-30"
    assert run_with_hook(program, {}).strip() == "0"
