"""Random interleavings of consumer, controller and executor steps, with
duplicated messages, stale writers and time passing, against the real
conditional writes (moto in-process, one step at a time).

Invariants after every step: no task is lost (each unfinished task keeps its
index entry), terminal states never change, attempts only rise, no two
executions of one task hold a live lease at once, and a writer acting for an
older attempt never changes anything. At the end, with faults over, every
task finishes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from atf_core import lifecycle
from atf_core.aws import make_clients
from atf_core.config import StackConfig
from atf_core.consumer import Consumer
from atf_core.definitions import Attr
from atf_core.queues import QueueDirectory, TaskMessage
from atf_core.schema import ScheduleRequest, TaskError, TaskStatus
from atf_core.store.base import Change, TaskRef
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import build_task
from atf_local.provision import provision
from tests.conftest import TEST_CONFIG, moto_session
from tests.functional.helpers import T0, raw_item

CONFIG = StackConfig.model_validate(TEST_CONFIG)
LEASE_S = 3 * CONFIG.timeouts.heartbeat_interval + CONFIG.timeouts.call_budget


@dataclass
class Execution:
    ref: TaskRef
    attempt: int
    last_ok: datetime

    def alive(self, now: datetime) -> bool:
        """An executor whose heartbeats have not landed for this long has killed itself."""
        return (now - self.last_ok).total_seconds() <= LEASE_S


class Interleavings(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        from moto import mock_aws

        self._mock = mock_aws()
        self._mock.start()
        clients = make_clients(endpoint_url=None, session=moto_session())
        provision(clients, CONFIG)
        self.sqs = clients.sqs
        self.store = DynamoTaskStore(clients.dynamodb, CONFIG)
        self.now = T0
        self.consumer = Consumer(self.store, clients.sqs, CONFIG, clock=lambda: self.now)
        self.queues = QueueDirectory(clients.sqs, CONFIG)
        self.mailbox: list[TaskMessage] = []
        self.live: list[Execution] = []
        self.zombies: list[Execution] = []
        self.tasks: list[TaskRef] = []
        self.final: dict[str, str] = {}
        self.attempts: dict[str, int] = {}

    def teardown(self) -> None:
        try:
            self._heal_and_finish_everything()
        finally:
            self._mock.stop()

    # -- steps ---------------------------------------------------------------
    @rule(priority=st.sampled_from(["high", "normal", "low"]), delay=st.sampled_from([0, 0, 3]))
    def schedule(self, priority: str, delay: int) -> None:
        request = ScheduleRequest.model_validate({"lambda": "work", "priority": priority, "delay_seconds": delay})
        task = build_task(CONFIG, request, self.now)
        assert self.store.create(task, request.fingerprint()).created
        self.tasks.append(TaskRef.of(task))

    @rule()
    def consumer_polls(self) -> None:
        self.consumer.poll()

    @rule()
    def controller_receives(self) -> None:
        for priority in ("high", "normal", "low"):
            url = self.queues.url("work", priority)
            for message in self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
                self.mailbox.append(TaskMessage.decode(message["Body"]))
                self.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])

    @precondition(lambda self: self.mailbox)
    @rule(data=st.data())
    def sqs_duplicates_a_message(self, data: st.DataObject) -> None:
        self.mailbox.append(data.draw(st.sampled_from(self.mailbox)))

    @precondition(lambda self: self.mailbox)
    @rule(data=st.data())
    def controller_claims(self, data: st.DataObject) -> None:
        message = self.mailbox.pop(data.draw(st.integers(0, len(self.mailbox) - 1)))
        ref = next(t for t in self.tasks if t.id == message.task_id)
        change = Change(now=self.now, attempt=message.attempt, entry_ms=message.due_ms)
        outcome = self.store.transition(ref, lifecycle.CLAIM, change)
        if outcome.applied:
            assert outcome.task is not None
            self.live.append(Execution(ref, outcome.task.attempt, self.now))

    @precondition(lambda self: self.live)
    @rule(data=st.data(), moves=st.booleans())
    def executor_heartbeats(self, data: st.DataObject, moves: bool) -> None:
        """A beat that moves the index entry, or one that only stamps the lease (the entry stays put)."""
        run = data.draw(st.sampled_from(self.live))
        change = Change(
            now=self.now, attempt=run.attempt, next_at=self.now + timedelta(seconds=CONFIG.timeouts.heartbeat)
        )
        transition = lifecycle.HEARTBEAT if moves else lifecycle.HEARTBEAT_STAMP
        if self.store.transition(run.ref, transition, change).applied:
            run.last_ok = self.now

    @precondition(lambda self: self.live)
    @rule(data=st.data(), result=st.sampled_from(["succeed", "fail_retriable", "fail_fatal"]))
    def executor_reports(self, data: st.DataObject, result: str) -> None:
        run = data.draw(st.sampled_from(self.live))
        self.live.remove(run)
        self._report(run, result)

    @precondition(lambda self: self.zombies)
    @rule(data=st.data(), result=st.sampled_from(["succeed", "fail_retriable", "heartbeat"]))
    def paused_executor_wakes_and_writes(self, data: st.DataObject, result: str) -> None:
        run = data.draw(st.sampled_from(self.zombies))
        current = self.store.get(run.ref.id)
        assert current is not None
        moved_on = current.attempt != run.attempt or current.status not in lifecycle.RUNNING
        applied = self._report(run, result)
        if moved_on:
            assert not applied, f"a stale write for attempt {run.attempt} changed {current}"

    @precondition(lambda self: self.live)
    @rule()
    def executor_pauses_past_its_lease(self) -> None:
        """A SIGSTOP'd executor: its lease runs out and the consumer hands its task on."""
        self.time_passes(CONFIG.timeouts.heartbeat + 1)
        self.consumer_polls()
        self.controller_receives()

    @rule(seconds=st.sampled_from([0.5, 2, 5, 12]))
    def time_passes(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
        for run in [r for r in self.live if not r.alive(self.now)]:
            self.live.remove(run)
            self.zombies.append(run)

    # -- invariants ----------------------------------------------------------
    @invariant()
    def nothing_lost_and_history_monotonic(self) -> None:
        for ref in self.tasks:
            item = raw_item(self.store, ref.id)
            status, attempt = item[Attr.STATUS], item[Attr.ATTEMPT]
            assert attempt >= self.attempts.get(ref.id, 0), "attempt went down"
            self.attempts[ref.id] = attempt
            if ref.id in self.final:
                assert status == self.final[ref.id], "a terminal state changed"
            if TaskStatus(status).terminal:
                self.final[ref.id] = status
            else:
                assert Attr.INDEX_PK in item, f"unfinished task {ref.id} ({status}) left the index: lost"

    @invariant()
    def at_most_one_live_execution_per_task(self) -> None:
        live = [r.ref.id for r in self.live if r.alive(self.now)]
        assert len(live) == len(set(live))

    # -- helpers -------------------------------------------------------------
    def _report(self, run: Execution, result: str) -> bool:
        change = Change(
            now=self.now,
            attempt=run.attempt,
            next_at=self.now + timedelta(seconds=1),
            error=TaskError(type="E", message="boom", attempt=run.attempt, at=self.now),
        )
        transition = {
            "succeed": lifecycle.SUCCEED,
            "fail_retriable": lifecycle.FAIL_RETRIABLE,
            "fail_fatal": lifecycle.FAIL_FATAL,
            "heartbeat": lifecycle.HEARTBEAT,
        }[result]
        return self.store.transition(run.ref, transition, change).applied

    def _heal_and_finish_everything(self) -> None:
        """Faults over: live executors finish, lost ones time out; every task must end."""
        for run in self.live:
            self._report(run, "succeed")
        self.live.clear()
        for _ in range(40):
            self.now += timedelta(seconds=CONFIG.timeouts.enqueue + 1)
            self.consumer.poll()
            self.mailbox.clear()
            self.controller_receives()
            for message in self.mailbox:
                ref = next(t for t in self.tasks if t.id == message.task_id)
                change = Change(now=self.now, attempt=message.attempt, entry_ms=message.due_ms)
                outcome = self.store.transition(ref, lifecycle.CLAIM, change)
                if outcome.applied and outcome.task is not None:
                    self._report(Execution(ref, outcome.task.attempt, self.now), "succeed")
            if all(TaskStatus(raw_item(self.store, t.id)[Attr.STATUS]).terminal for t in self.tasks):
                return
        unfinished = [t.id for t in self.tasks if not TaskStatus(raw_item(self.store, t.id)[Attr.STATUS]).terminal]
        raise AssertionError(f"tasks never finished after the faults healed: {unfinished}")


Interleavings.TestCase.settings = settings(
    max_examples=30,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestInterleavings = Interleavings.TestCase
