"""An executor process that dies holding a task (killed, out of memory, a crash in native code) closes its
connections to its host: the host records that attempt's end at once, as a LostExecution failure fenced by
the attempt, so the task runs again after its backoff rather than once its lease lapses."""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.connection import Client
from pathlib import Path
from typing import Any

import pytest

from atf_core import lifecycle
from atf_core.config import Limits, StackConfig
from atf_core.limits import Grant, Limiter
from atf_core.schema import LOST_EXECUTION, Task, TaskError, TaskStatus, from_ms, to_ms, utcnow
from atf_core.store.base import Change, TaskRef
from atf_core.store.counters import Counters
from atf_core.store.tasks import DynamoTaskStore
from atf_core.telemetry import MetricBuffer
from atf_sdk.worker.attempt_ends import AttemptEnds, after_finish, limits_and_chains
from atf_sdk.worker.controller import NextWorkServer, pid_of
from atf_sdk.worker.protocol import NextWork, Work
from tests.telemetry.test_worker_metrics import claimed

EXECUTOR_PID = 4242
EXECUTOR = f"executor-host:{EXECUTOR_PID}"


class HandsOut:
    """A controller with one task to hand to the first executor thread that asks."""

    draining = False

    def __init__(self, task: Task) -> None:
        self._task: Task | None = task

    def next_work(self, lambda_name: str, wait_s: float, worker: str = "", wanted: Any = None) -> Task | None:
        task, self._task = self._task, None
        return task


@pytest.fixture
def limited(config: StackConfig) -> StackConfig:
    """The test stack, with `work` running one task at a time: a lost attempt's slot must come back."""
    lambdas = dict(config.lambdas)
    lambdas["work"] = lambdas["work"].model_copy(update={"limits": Limits(max_running=1)})
    return config.model_copy(update={"lambdas": lambdas})


@pytest.fixture
def address() -> Iterator[str]:
    directory = Path(tempfile.mkdtemp(prefix="atf-test-"))
    yield str(directory / "c.sock")
    shutil.rmtree(directory, ignore_errors=True)


def host_ends(aws: Any, config: StackConfig, store: DynamoTaskStore) -> AttemptEnds:
    """AttemptEnds as a worker host composes it."""
    follow = after_finish(*limits_and_chains(store, aws.dynamodb, config, utcnow))
    return AttemptEnds(store, config, MetricBuffer(service="test"), utcnow, follow)


@contextmanager
def host_serving(controller: HandsOut, address: str, ends: AttemptEnds | None = None) -> Iterator[NextWorkServer]:
    """The host's NextWork server, handing out what `controller` finds, recording losses through `ends` (none:
    not recorded); done with every connection on leaving."""
    recording = {"lost": ends.lost} if ends is not None else {}
    server = NextWorkServer(controller, address, b"key", **recording)  # type: ignore[arg-type]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
        server.settle(10)  # a closed connection, as a dead process's: the server is done with it soon after
    finally:
        server.close()


def executor_dies_holding(address: str, task: Task, ends: AttemptEnds, before_dying: Callable[[], None]) -> None:
    """An executor thread asks the host's server for work, is handed `task`, and its process dies."""
    with host_serving(HandsOut(task), address, ends), Client(address, family="AF_UNIX", authkey=b"key") as executor:
        executor.send(NextWork("work", wait_s=0.01, worker=EXECUTOR))
        assert isinstance(executor.recv(), Work)
        before_dying()


def claimed_holding_the_slot(aws: Any, store: DynamoTaskStore, limited: StackConfig) -> Task:
    """A `work` task claimed for EXECUTOR, holding the lambda's one running slot."""
    task = claimed(store, limited, "work", host=EXECUTOR)
    limiter = Limiter(Counters(aws.dynamodb, limited.table_name), limited)
    assert isinstance(limiter.acquire("work", task.collection, task.id), Grant)
    return task


def test_an_executor_that_dies_holding_a_task_has_its_attempt_recorded_as_lost_at_once(
    aws: Any, limited: StackConfig, address: str
) -> None:
    # Given a task claimed for an executor, holding the lambda's one running slot
    store = DynamoTaskStore(aws.dynamodb, limited)
    task = claimed_holding_the_slot(aws, store, limited)
    # When its executor dies while it runs the task
    before = utcnow()
    executor_dies_holding(address, task, host_ends(aws, limited, store), lambda: None)
    # Then the attempt is a retriable failure at once, naming the executor and how its loss was seen
    after = store.get(task.id)
    assert after is not None and (after.status, after.attempt) == (TaskStatus.RETRIABLE_FAILURE, 1)
    [lost] = after.errors
    assert (lost.type, lost.attempt, lost.host) == (LOST_EXECUTION, 1, EXECUTOR)
    assert lost.message == (
        f"attempt 1 was lost: its executor {EXECUTOR} ended while running it, as its host saw its connection close"
    )
    assert lost.at >= from_ms(to_ms(before)), "stored to the millisecond: in the same one as `before` too"
    # And it runs again after its backoff, not its lease
    assert after.next_at is not None
    assert (after.next_at - lost.at).total_seconds() <= limited.timeouts.backoff_base  # the first retry's ceiling
    # And its running slot is free for the next task
    assert set(Counters(aws.dynamodb, limited.table_name).slots("work")) == set()


@pytest.mark.parametrize(
    ("dead_letter", "ends_as"), [(True, TaskStatus.DEAD_LETTER), (False, TaskStatus.FATAL_FAILURE)]
)
def test_a_lost_last_attempt_fails_its_task_for_good(
    aws: Any, config: StackConfig, address: str, dead_letter: bool, ends_as: TaskStatus
) -> None:
    # Given a task on its last attempt, of a lambda that keeps its dead letters or not
    lambdas = dict(config.lambdas)
    lambdas["work"] = lambdas["work"].model_copy(update={"dead_letter": dead_letter})
    config = config.model_copy(update={"lambdas": lambdas})
    store = DynamoTaskStore(aws.dynamodb, config)
    task = claimed(store, config, "work", host=EXECUTOR, max_attempts=1)
    # When its executor dies while it runs the task
    executor_dies_holding(address, task, host_ends(aws, config, store), lambda: None)
    # Then it has failed for good, where its lambda puts such tasks, with the loss as its error
    after = store.get(task.id)
    assert after is not None and after.status is ends_as
    assert [e.type for e in after.errors] == [LOST_EXECUTION]


def test_an_executor_that_recorded_its_end_before_it_died_keeps_that_end(
    aws: Any, limited: StackConfig, address: str
) -> None:
    # Given a task whose executor recorded its success, and took the lambda's slot for another task since
    store = DynamoTaskStore(aws.dynamodb, limited)
    task = claimed(store, limited, "work", host=EXECUTOR)
    limiter = Limiter(Counters(aws.dynamodb, limited.table_name), limited)

    def succeed_then_take_the_slot() -> None:
        change = Change(now=utcnow(), attempt=task.attempt, result='"done"')
        assert store.transition(TaskRef.of(task), lifecycle.SUCCEED, change).applied
        assert isinstance(limiter.acquire("work", "default", "next-task"), Grant)

    # When its process dies before it asks for more work
    executor_dies_holding(address, task, host_ends(aws, limited, store), succeed_then_take_the_slot)
    # Then the success stands, with no error, and no slot was given back on its behalf
    after = store.get(task.id)
    assert after is not None and (after.status, after.errors, after.result) == (TaskStatus.SUCCESS, [], "done")
    assert set(Counters(aws.dynamodb, limited.table_name).slots("work")) == {"next-task"}


def test_the_loss_of_an_attempt_past_its_time_limit_waits_for_the_watchers_write(
    aws: Any, config: StackConfig, address: str
) -> None:
    # Given a task with a time limit, whose executor's time-limit watcher sends the attempt's TaskTimeout and
    # ends the process, the write still on its way as the host sees the connection close
    store = DynamoTaskStore(aws.dynamodb, config)
    task = claimed(store, config, "work", host=EXECUTOR, timeout_seconds=0.05)
    now = utcnow()
    timeout = TaskError(type="TaskTimeout", message="ran over its time limit of 0.05s", attempt=1, at=now)
    landing = threading.Timer(
        1.0,
        store.transition,
        (TaskRef.of(task), lifecycle.FAIL_RETRIABLE, Change(now=utcnow(), attempt=1, next_at=now, error=timeout)),
    )

    def overrun_then_end() -> None:
        time.sleep(0.1)
        landing.start()

    # When the process ends
    executor_dies_holding(address, task, host_ends(aws, config, store), overrun_then_end)
    landing.join()
    # Then the attempt's end is the watcher's: the host's write came after it, and was refused
    after = store.get(task.id)
    assert after is not None and [e.type for e in after.errors] == ["TaskTimeout"]


class HandsOutOnceGone(HandsOut):
    """A controller that, asked for work, finds the task only once the asking executor is gone: the answer
    cannot be sent. (`at_once`: the number of asks answered first, with the same task, as usual.)"""

    def __init__(self, task: Task, at_once: int = 0) -> None:
        super().__init__(task)
        self._at_once = at_once
        self.asked, self.gone = threading.Event(), threading.Event()
        self.saw_it_gone = False  # read by the test: an assert here would run on the server's thread, unseen

    def next_work(self, lambda_name: str, wait_s: float, worker: str = "", wanted: Any = None) -> Task | None:
        if self._at_once:
            self._at_once -= 1
            return self._task
        self.asked.set()
        self.saw_it_gone = self.gone.wait(10)
        return super().next_work(lambda_name, wait_s, worker, wanted)


def asks_and_is_gone_before_the_answer(address: str, controller: HandsOutOnceGone) -> None:
    """An executor thread of EXECUTOR asks for work, and its connection closes while the host looks for it."""
    with Client(address, family="AF_UNIX", authkey=b"key") as executor:
        executor.send(NextWork("work", wait_s=0.01, worker=EXECUTOR))
        assert controller.asked.wait(10)
    controller.gone.set()


def test_a_task_claimed_for_an_executor_that_died_before_it_was_handed_over_is_recorded_as_lost(
    aws: Any, limited: StackConfig, address: str
) -> None:
    # Given a task claimed for an executor thread that asked for work, holding the lambda's one running slot
    store = DynamoTaskStore(aws.dynamodb, limited)
    task = claimed_holding_the_slot(aws, store, limited)
    controller = HandsOutOnceGone(task)
    with host_serving(controller, address, host_ends(aws, limited, store)) as server:
        # When its process dies before the host's answer reaches it
        asks_and_is_gone_before_the_answer(address, controller)
    assert controller.saw_it_gone
    # Then its exit counts as one that ran no task (the host's count of failed starts)
    assert server.handed_work(EXECUTOR_PID) is False
    # And the claimed attempt is a retriable failure, saying it never reached the executor, and its slot is free
    after = store.get(task.id)
    assert after is not None and (after.status, after.attempt) == (TaskStatus.RETRIABLE_FAILURE, 1)
    [lost] = after.errors
    assert (lost.type, lost.host) == (LOST_EXECUTION, EXECUTOR)
    assert lost.message == (
        f"attempt 1 was lost: its executor {EXECUTOR} ended before it was handed the task,"
        " as its host saw its connection close"
    )
    assert set(Counters(aws.dynamodb, limited.table_name).slots("work")) == set()


def a_task() -> Task:
    return Task.model_validate(
        {"id": "t", "lambda": "work", "collection": "default", "priority": "normal", "payload": {}, "status": "claimed",
         "attempt": 1, "max_attempts": 3, "scheduled_at": utcnow(), "created_at": utcnow()}
    )  # fmt: skip


def test_the_host_knows_which_executors_were_handed_a_task(config: StackConfig, address: str) -> None:
    # Its health counts an executor that died soon after it started as a failed start only if it ran nothing
    with host_serving(HandsOut(a_task()), address) as server, Client(address, family="AF_UNIX", authkey=b"key") as ex:
        ex.send(NextWork("work", wait_s=0.01, worker="this-host:4242"))
        assert isinstance(ex.recv(), Work)
        ex.send(NextWork("work", wait_s=0.01, worker="this-host:4343"))
        ex.recv()
    assert (server.handed_work(4242), server.handed_work(4242), server.handed_work(4343)) == (True, False, False)


def test_an_executor_handed_a_task_counts_as_handed_though_a_later_hand_over_to_it_failed(address: str) -> None:
    # Given an executor process that was handed a task on one of its threads
    controller = HandsOutOnceGone(a_task(), at_once=1)
    with host_serving(controller, address) as server, Client(address, family="AF_UNIX", authkey=b"key") as ex:
        ex.send(NextWork("work", wait_s=0.01, worker=EXECUTOR))
        assert isinstance(ex.recv(), Work)
        # When another of its threads asks, and is gone before the answer reaches it
        asks_and_is_gone_before_the_answer(address, controller)
    assert controller.saw_it_gone
    # Then the process still counts as one that ran a task
    assert server.handed_work(EXECUTOR_PID) is True


@pytest.mark.parametrize(
    ("worker", "pid"),
    [("host:4242", 4242), ("ip-10-0-0-1:7", 7), ("host", None), ("host:", None), ("host:4²", None), ("h:٤٢", None)],
)
def test_an_executors_pid_is_read_from_its_worker_id_or_none(worker: str, pid: int | None) -> None:
    assert pid_of(worker) == pid


def test_the_loss_of_an_attempt_a_later_one_has_replaced_is_refused(
    aws: Any, limited: StackConfig, address: str
) -> None:
    # Given a task whose attempt 1 outlived its lease: the consumer sent it again and attempt 2 holds it, and its slot
    store = DynamoTaskStore(aws.dynamodb, limited)
    task = claimed(store, limited, "work", host=EXECUTOR)
    limiter = Limiter(Counters(aws.dynamodb, limited.table_name), limited)

    def replaced() -> None:
        assert store.transition(TaskRef.of(task), lifecycle.REQUEUE, Change(now=utcnow(), attempt=1)).applied
        assert store.transition(TaskRef.of(task), lifecycle.CLAIM, Change(now=utcnow(), attempt=1)).applied
        assert isinstance(limiter.acquire("work", task.collection, task.id), Grant)

    # When attempt 1's executor dies
    executor_dies_holding(address, task, host_ends(aws, limited, store), replaced)
    # Then attempt 2 goes on undisturbed, with its slot
    after = store.get(task.id)
    assert after is not None and (after.status, after.attempt, after.errors) == (TaskStatus.CLAIMED, 2, [])
    assert set(Counters(aws.dynamodb, limited.table_name).slots("work")) == {task.id}
