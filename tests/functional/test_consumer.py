"""The store consumer against DynamoDB and SQS (moto in-process), with a controlled clock."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from atf_core import lifecycle
from atf_core.config import StackConfig
from atf_core.consumer import Consumer, Event
from atf_core.gating import Gating
from atf_core.queues import QueueDirectory, TaskMessage
from atf_core.schema import Gate, GateAction, ScheduleRequest, Task, TaskStatus, to_ms
from atf_core.store.base import Change, TaskRef
from atf_core.store.codec import index_partition
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling
from atf_sdk.worker.buffers import Buffered
from atf_sdk.worker.controller import ControllerSettings
from tests.conftest import work_controller
from tests.functional.helpers import T0, gates_written_at_once


class World:
    def __init__(self, clients: Any, config: StackConfig) -> None:
        self.config = config
        self.now = T0
        self.store = DynamoTaskStore(clients.dynamodb, config)
        self.dynamodb = clients.dynamodb
        self.sqs = clients.sqs
        self.queues = QueueDirectory(clients.sqs, config)
        self.consumer = self.new_consumer()

    def new_consumer(self) -> Consumer:
        return Consumer(self.store, self.sqs, self.config, clock=lambda: self.now)

    def schedule(self, **body: Any) -> Task:
        request = ScheduleRequest.model_validate({"lambda": "work", **body})
        return Scheduling(self.store, self.config).schedule(request, self.now).task

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def drain(self, priority: str = "normal", lambda_name: str = "work") -> list[TaskMessage]:
        url = self.queues.url(lambda_name, priority)
        found: list[TaskMessage] = []
        while True:
            batch = self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
            if not batch:
                return found
            for raw in batch:
                found.append(TaskMessage.decode(raw["Body"]))
                self.sqs.delete_message(QueueUrl=url, ReceiptHandle=raw["ReceiptHandle"])

    def status(self, task: Task) -> TaskStatus:
        current = self.store.get(task.id)
        assert current is not None
        return current.status

    def gate(self, action: GateAction, collection: str | None = None, until: datetime | None = None) -> None:
        Gating(self.store, self.config).set("work", collection, action, until)

    def claim_all(self) -> int:
        """Claim every queued message as a controller would; how many claims were applied."""
        return self.claim_all_of(self.drain())

    def claim_all_of(self, messages: list[TaskMessage]) -> int:
        applied = 0
        for message in messages:
            ref = TaskRef(message.task_id, "work", "normal")
            change = Change(now=self.now, attempt=message.attempt, entry_ms=message.due_ms)
            applied += self.store.transition(ref, lifecycle.CLAIM, change).applied
        return applied


def test_due_tasks_are_enqueued_with_their_attempt_and_delayed_ones_wait(world: World) -> None:
    now_task = world.schedule(payload={"a": 1})
    later_task = world.schedule(delay_seconds=30)
    report = world.consumer.poll()
    assert report.total(Event.ENQUEUED) == 1
    [message] = world.drain()
    assert (message.task_id, message.attempt) == (now_task.id, 0)
    assert world.status(later_task) is TaskStatus.NEW


def test_lookahead_enqueues_a_moment_early_and_the_message_carries_the_due_time(world: World) -> None:
    task = world.schedule(delay_seconds=world.config.lookahead / 2)
    world.consumer.poll()
    [message] = world.drain()
    assert message.task_id == task.id
    assert message.due_ms == int(task.scheduled_at.timestamp() * 1000)


def test_a_second_poll_does_not_send_again(world: World) -> None:
    world.schedule()
    world.consumer.poll()
    world.advance(1)
    assert world.consumer.poll().total(Event.ENQUEUED) == 0
    assert len(world.drain()) == 1


@pytest.fixture
def world(aws: Any, config: StackConfig) -> World:
    return World(aws, config)


@pytest.fixture
def recording(aws: Any, config: StackConfig) -> World:
    """A consumer configured to write each task as enqueued before it sends it."""
    return World(aws, config.model_copy(update={"record_enqueued": True}))


def test_two_consumers_at_once_run_each_task_once(world: World) -> None:
    for _ in range(6):
        world.schedule()
    other = world.new_consumer()
    # Both send every task (neither writes), and one claim of each wins
    assert world.consumer.poll().total(Event.ENQUEUED) + other.poll().total(Event.ENQUEUED) == 12
    assert world.claim_all() == 6


def test_two_recording_consumers_at_once_send_each_task_once(recording: World) -> None:
    for _ in range(6):
        recording.schedule()
    other = recording.new_consumer()
    assert recording.consumer.poll().total(Event.ENQUEUED) + other.poll().total(Event.ENQUEUED) == 6
    assert recording.claim_all() == 6


def test_a_restarted_consumer_sends_waiting_tasks_again_but_not_running_ones(world: World) -> None:
    running, waiting = world.schedule(), world.schedule()
    world.consumer.poll()
    messages = {m.task_id: m for m in world.drain()}
    claim = Change(now=world.now, attempt=0, entry_ms=messages[running.id].due_ms)
    assert world.store.transition(TaskRef.of(running), lifecycle.CLAIM, claim).applied
    world.advance(1)
    assert world.new_consumer().poll().total(Event.ENQUEUED) == 1  # it knows nothing it sent before
    assert [m.task_id for m in world.drain()] == [waiting.id]


def test_a_message_sent_before_a_retry_cannot_claim_the_retry_early(world: World) -> None:
    task = world.schedule()
    world.consumer.poll()
    [first] = world.drain()
    assert world.claim_all_of([first, first]) == 1  # a duplicate of the message fails its claim
    backoff = Change(now=world.now, attempt=1, next_at=world.now + timedelta(seconds=60), error=None)
    assert world.store.transition(TaskRef.of(task), lifecycle.FAIL_RETRIABLE, backoff).applied
    # A message for attempt 1 sent as if the entry were still due (a stale index read) fails its claim
    stale = TaskMessage(task.id, 1, first.due_ms, first.collection)
    assert world.claim_all_of([stale]) == 0
    world.advance(61)
    world.consumer.poll()
    [retry] = world.drain()
    assert (retry.attempt, retry.due_ms > first.due_ms) == (1, True)
    assert world.claim_all_of([retry]) == 1


def test_backpressure_bounds_messages_in_flight_per_queue(aws: Any, config: StackConfig) -> None:
    world = World(aws, config.model_copy(update={"max_in_flight_per_queue": 10}))
    for _ in range(25):
        world.schedule()
    assert world.consumer.poll().total(Event.ENQUEUED) == 10
    assert world.consumer.poll().total(Event.ENQUEUED) == 0  # the queue is still full
    assert len(world.drain()) == 10
    world.advance(3)  # the budget re-reads the depth
    assert world.consumer.poll().total(Event.ENQUEUED) == 10


def test_a_paused_lambda_waits_and_resume_releases_it(world: World) -> None:
    world.gate(GateAction.PAUSE)
    task = world.schedule()
    delayed = world.schedule(delay_seconds=2)
    world.advance(3)
    assert world.consumer.poll().total(Event.ENQUEUED) == 0
    Gating(world.store, world.config).lift("work", None)
    assert world.consumer.poll().total(Event.ENQUEUED) == 2
    assert {m.task_id for m in world.drain()} == {task.id, delayed.id}


def test_a_task_handed_back_under_a_pause_is_sent_again_when_it_lifts(world: World) -> None:
    task = world.schedule()
    world.consumer.poll()
    world.gate(GateAction.PAUSE)
    world.drain()  # the controller finds the gate and deletes the message: nothing was written
    world.advance(1)
    assert world.consumer.poll().total(Event.ENQUEUED) == 0
    Gating(world.store, world.config).lift("work", None)
    world.advance(1)
    assert world.consumer.poll().total(Event.ENQUEUED) == 1
    assert [m.task_id for m in world.drain()] == [task.id]


def test_lifting_a_gate_on_one_lambda_sends_nothing_of_another_again(world: World) -> None:
    world.schedule()
    world.consumer.poll()
    assert len(world.drain()) == 1  # sent, and (say) still queued for a worker
    Gating(world.store, world.config).set("sleepy", None, GateAction.PAUSE, None)
    world.advance(1)
    world.consumer.poll()
    Gating(world.store, world.config).lift("sleepy", None)
    world.advance(1)
    assert world.consumer.poll().total(Event.ENQUEUED) == 0


def test_lifting_a_collections_gate_sends_nothing_of_another_collection_again(world: World) -> None:
    free = world.schedule(collection="free")
    world.gate(GateAction.PAUSE, collection="held")
    world.consumer.poll()
    assert [m.task_id for m in world.drain()] == [free.id]  # sent, and (say) still queued for a worker
    world.advance(1)
    Gating(world.store, world.config).lift("work", "held")
    world.advance(1)
    assert world.consumer.poll().total(Event.ENQUEUED) == 0  # only what the lifted gate held back is looked at again


def test_a_paused_collection_waits_while_others_run(world: World) -> None:
    world.gate(GateAction.PAUSE, collection="slow")
    slow = world.schedule(collection="slow")
    fast = world.schedule(collection="fast")
    world.consumer.poll()
    assert [m.task_id for m in world.drain()] == [fast.id]
    assert world.status(slow) is TaskStatus.NEW


def test_more_paused_collections_than_an_in_list_holds_still_leave_the_others_running(world: World) -> None:
    """DynamoDB refuses an IN list of more than 100 values (the tests' clients do too: tests/aws_rules.py):
    every Query of the lambda's partitions would be refused, and none of its tasks sent."""
    pauses = [
        Gate(lambda_="work", collection=f"tenant-{n}", action=GateAction.PAUSE, created_at=T0)
        for n in range(120)
    ]  # fmt: skip
    gates_written_at_once(world.dynamodb, world.config, pauses)
    paused = world.schedule(collection="tenant-7")
    running = world.schedule(collection="fast")
    report = world.consumer.poll()
    assert report.total(Event.ERROR) == 0
    assert [m.task_id for m in world.drain()] == [running.id]
    assert world.status(paused) is TaskStatus.NEW


def test_a_pause_lifts_by_itself_at_its_until_time(world: World) -> None:
    world.gate(GateAction.PAUSE, until=datetime.now().astimezone() + timedelta(seconds=30))
    world.now = datetime.now().astimezone()
    task = world.schedule()
    assert world.consumer.poll().total(Event.ENQUEUED) == 0
    world.advance(31)
    world.consumer.poll()
    assert [m.task_id for m in world.drain()] == [task.id]


def test_a_drop_gate_ends_due_tasks_as_dropped_with_the_reason(world: World) -> None:
    Gating(world.store, world.config).set("work", "spam", GateAction.DROP, None, reason="campaign cancelled")
    spam = world.schedule(collection="spam")
    ham = world.schedule(collection="ham")
    report = world.consumer.poll()
    assert report.total(Event.DROPPED) == 1
    dropped = world.store.get(spam.id)
    assert dropped is not None and dropped.status is TaskStatus.DROPPED
    assert dropped.reason is not None and "campaign cancelled" in dropped.reason
    assert [m.task_id for m in world.drain()] == [ham.id]


def test_a_drop_gate_does_not_drop_a_task_read_ahead_that_is_due_once_it_has_lifted(world: World) -> None:
    # Given a drop gate that lifts by itself in 0.2 s, a task due now and one due in 0.3 s (within the lookahead)
    world.gate(GateAction.DROP, until=world.now + timedelta(seconds=0.2))
    now, after_it = world.schedule(), world.schedule(delay_seconds=0.3)
    assert world.config.lookahead > 0.3
    # When the consumer polls: the one due now is dropped; the other is sent ahead as any task is
    assert world.consumer.poll().total(Event.DROPPED) == 1
    assert (world.status(now), world.status(after_it)) == (TaskStatus.DROPPED, TaskStatus.NEW)
    assert [m.task_id for m in world.drain()] == [after_it.id]
    # And once the gate has lifted, the consumer does not send it again (it was sent, and not handed back)
    world.advance(0.25)
    assert world.consumer.poll().total(Event.ENQUEUED) == 0


def test_a_task_due_before_a_drop_gates_until_is_dropped_though_first_looked_at_after_it(world: World) -> None:
    # Given a drop gate that lifts by itself in 0.3 s, and a task due in 0.2 s (read ahead: it waits)
    world.gate(GateAction.DROP, until=world.now + timedelta(seconds=0.3))
    task = world.schedule(delay_seconds=0.2)
    assert world.consumer.poll().total(Event.DROPPED) == 0 and world.drain() == []
    # When the next poll comes after the gate has lifted (a poll interval is longer than that)
    world.advance(0.5)
    # Then the task, due while the gate was in force, is dropped all the same
    assert world.consumer.poll().total(Event.DROPPED) == 1 and world.drain() == []
    assert world.status(task) is TaskStatus.DROPPED


def test_a_task_sent_ahead_of_a_drop_gates_until_is_claimed_once_it_has_lifted(
    world: World, aws: Any, drained: list[Any]
) -> None:
    # Given a drop gate that lifts by itself in 0.3 s, and a task due in 0.4 s, sent ahead by the consumer
    world.gate(GateAction.DROP, until=world.now + timedelta(seconds=0.3))
    task = world.schedule(delay_seconds=0.4)
    world.consumer.poll()
    [message] = world.drain()
    # And a worker host whose view of the gates, read after the message came, holds the gate (in force then)
    controller = work_controller(aws, world.config, drained, ControllerSettings(gate_refresh_s=60), limits=False)[0]
    controller._clock = lambda: world.now
    rank = world.config.lambdas["work"].priorities.index(task.priority)
    item = Buffered(rank, message.due_ms, 0, message, "https://queue.invalid/none", "receipt")
    assert controller._gate_view(read_after=item.received_at).decide("work", task.collection) is not None
    # When it claims the task at its run time
    world.advance(0.4)
    claimed = controller.claim("work", item, "h:1")
    # Then the gate, lifted by then, does not drop it: the task is claimed
    assert claimed is not None and claimed.id == task.id and world.status(task) is TaskStatus.CLAIMED


def test_a_drop_gate_drops_a_task_read_ahead_only_if_it_holds_at_the_tasks_run_time(world: World) -> None:
    # Given drop gates on two collections, each with a task due in 0.3 s (within the lookahead)
    world.gate(GateAction.DROP, collection="ham")
    world.gate(GateAction.DROP, collection="spam")
    ham, spam = (
        world.schedule(collection="ham", delay_seconds=0.3),
        world.schedule(collection="spam", delay_seconds=0.3),
    )
    # When the consumer reads them ahead: neither is dropped yet, nor sent
    assert world.consumer.poll().total(Event.DROPPED) == 0 and world.drain() == []
    # And ham's gate is lifted by hand before they are due, and the consumer polls once they are
    Gating(world.store, world.config).lift("work", "ham")
    world.advance(0.4)
    # Then spam's, still gated, is dropped, and ham's runs
    assert world.consumer.poll().total(Event.DROPPED) == 1
    assert (world.status(ham), world.status(spam)) == (TaskStatus.NEW, TaskStatus.DROPPED)
    assert [m.task_id for m in world.drain()] == [ham.id]


def test_a_task_whose_message_was_lost_is_sent_again_after_the_enqueue_timeout(world: World) -> None:
    task = world.schedule()
    world.consumer.poll()
    world.drain()  # the message is lost
    world.advance(world.config.timeouts.enqueue - 1)
    assert world.consumer.poll().total(Event.ENQUEUED) == 0  # it may still be queued behind others
    world.advance(2)
    assert world.consumer.poll().total(Event.ENQUEUED) == 1
    [message] = world.drain()
    assert (message.task_id, message.attempt) == (task.id, 0)
    assert world.status(task) is TaskStatus.NEW  # nothing was written


def test_a_recorded_task_whose_message_was_lost_is_enqueued_again(recording: World) -> None:
    task = recording.schedule()
    recording.consumer.poll()
    assert recording.status(task) is TaskStatus.ENQUEUED
    recording.drain()  # the message is lost
    recording.advance(recording.config.timeouts.enqueue - 1)
    assert recording.consumer.poll().total(Event.REQUEUED) == 0
    recording.advance(2)
    assert recording.consumer.poll().total(Event.REQUEUED) == 1
    [message] = recording.drain()
    assert (message.task_id, message.attempt) == (task.id, 0)
    assert recording.store.get(task.id).errors == []  # type: ignore[union-attr] # a lost message is no lost attempt


def poll_until_requeued(world: World, limit_s: float) -> float:
    """Poll once a second; the seconds it took for the consumer to re-enqueue."""
    waited = 0.0
    while waited <= limit_s:
        if world.consumer.poll().total(Event.REQUEUED):
            return waited
        world.advance(1)
        waited += 1
    raise AssertionError(f"not re-enqueued within {limit_s}s")


@pytest.mark.parametrize(
    "heartbeat",
    [None, lifecycle.HEARTBEAT, lifecycle.HEARTBEAT_STAMP],
    ids=["claimed", "processing", "processing, entry not moved"],
)
def test_a_task_whose_worker_died_is_enqueued_again_after_its_timeout(
    world: World, heartbeat: lifecycle.Transition | None
) -> None:
    task = world.schedule()
    world.consumer.poll()
    [message] = world.drain()
    ref = TaskRef.of(task)
    claim = Change(now=world.now, attempt=message.attempt, host="box:42")
    assert world.store.transition(ref, lifecycle.CLAIM, claim).applied
    timeout = world.config.timeouts.claim
    if heartbeat is not None:
        beat = Change(now=world.now, attempt=1, next_at=world.now + timedelta(seconds=world.config.timeouts.heartbeat))
        assert world.store.transition(ref, heartbeat, beat).applied
        timeout = world.config.timeouts.heartbeat
    took = poll_until_requeued(world, limit_s=timeout + world.config.timeouts.lease_floor + 2)
    # never before the timeout; at most one lease floor later, the consumer's own watch of the stamp
    assert timeout <= took <= timeout + world.config.timeouts.lease_floor + 1
    [again] = world.drain()
    assert (again.task_id, again.attempt) == (task.id, 1)  # the next claim makes it attempt 2
    requeued = world.store.get(task.id)
    assert requeued is not None and requeued.status is TaskStatus.ENQUEUED
    # And the lost attempt is in its error history: which executor, when, and how it was seen
    [lost] = requeued.errors
    assert requeued.last_error == lost
    assert (lost.type, lost.attempt, lost.host, lost.at) == ("LostExecution", 1, "box:42", world.now)
    if heartbeat is None:
        assert "claimed at" in lost.message and "no start recorded" in lost.message, lost.message
    else:
        assert "lease expired: no heartbeat since" in lost.message, lost.message


def test_a_live_task_whose_beats_only_stamp_its_lease_is_never_enqueued_again(world: World) -> None:
    # Given a running task whose heartbeats never move its (long due) index entry
    task = world.schedule()
    world.consumer.poll()
    assert len(world.drain()) == 1
    ref = TaskRef.of(task)
    assert world.store.transition(ref, lifecycle.CLAIM, Change(now=world.now, attempt=0)).applied
    timeouts = world.config.timeouts
    # When the consumer polls every second for three heartbeat timeouts while the stamps land
    requeued = 0
    for second in range(int(3 * timeouts.heartbeat)):
        if second % int(timeouts.heartbeat_interval) == 0:
            beat = Change(now=world.now, attempt=1)
            assert world.store.transition(ref, lifecycle.HEARTBEAT_STAMP, beat).applied
        requeued += world.consumer.poll().total(Event.REQUEUED)
        world.advance(1)
    # Then it never hands the task on
    assert requeued == 0 and world.status(task) is TaskStatus.PROCESSING
    assert world.drain() == []


def test_a_consumer_whose_clock_runs_ahead_still_waits_a_full_lease(world: World) -> None:
    task = world.schedule()
    world.consumer.poll()
    assert len(world.drain()) == 1
    assert world.store.transition(TaskRef.of(task), lifecycle.CLAIM, Change(now=world.now, attempt=0)).applied
    # A second consumer whose clock is an hour ahead sees the claim deadline long passed
    ahead = Consumer(world.store, world.sqs, world.config, clock=lambda: world.now + timedelta(hours=1))
    assert ahead.poll().total(Event.REQUEUED) == 0
    world.advance(world.config.timeouts.lease_floor - 1)
    assert ahead.poll().total(Event.REQUEUED) == 0
    world.advance(2)
    assert ahead.poll().total(Event.REQUEUED) == 1


class StaleView:
    """The store as a consumer may see it: its eventually consistent reads and its index (a GSI) as they
    stood at `freeze()`, while writes go through."""

    def __init__(self, store: DynamoTaskStore, partitions: list[str], up_to: datetime) -> None:
        self._store, self._partitions, self._up_to = store, partitions, up_to
        self._tasks: list[Task] | None = None
        self._entries: dict[str, list[Any]] = {}

    def freeze(self, task_ids: list[str]) -> None:
        self._tasks = self._store.get_many(task_ids)
        self._entries = {p: list(self._store.due(p, self._up_to)) for p in self._partitions}

    def get_many(self, ids: Any, consistent: bool = True) -> list[Task]:
        if self._tasks is None or consistent:
            return self._store.get_many(ids, consistent)
        return [task for task in self._tasks if task.id in set(ids)]

    def due(self, partition: str, up_to: datetime, *args: Any, **kwargs: Any) -> Any:
        if self._tasks is None:
            return self._store.due(partition, up_to, *args, **kwargs)
        return iter([e for e in self._entries.get(partition, []) if e.next_ms <= to_ms(up_to)])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_a_claimed_task_whose_first_heartbeat_landed_is_not_enqueued_again_from_a_stale_view(world: World) -> None:
    # Given a task claimed at once, watched by a second consumer (its clock ahead) from its claim on
    task = world.schedule()
    world.consumer.poll()
    [message] = world.drain()
    ref, claimed_at = TaskRef.of(task), world.now
    claim = Change(now=claimed_at, attempt=message.attempt, entry_ms=message.due_ms, host="a:1")
    assert world.store.transition(ref, lifecycle.CLAIM, claim).applied
    timeouts = world.config.timeouts
    partitions = [index_partition(a, "work", "normal", shard) for shard in range(8) for a in ("s", "n")]
    view = StaleView(world.store, partitions, claimed_at + timedelta(hours=1))
    ahead = timedelta(seconds=timeouts.lease_floor)
    watching = Consumer(view, world.sqs, world.config, clock=lambda: world.now + ahead, io_threads=1)  # type: ignore[arg-type]
    world.advance(0.1)
    assert watching.poll().total(Event.REQUEUED) == 0
    # When its read of the task and its index lag behind the executor's first heartbeat, landed in its lease
    world.advance(timeouts.claim - 0.2)
    view.freeze([task.id])  # still claimed, as of just before the beat
    beat = Change(now=world.now, attempt=1, next_at=world.now + timedelta(seconds=timeouts.heartbeat))
    assert world.store.transition(ref, lifecycle.HEARTBEAT, beat).applied
    world.advance(1)
    # Then the consumer's decision from that view is refused: the task is processing, not claimed
    assert watching.poll().total(Event.REQUEUED) == 0
    after = world.store.get(task.id)
    assert after is not None and (after.status, after.attempt) == (TaskStatus.PROCESSING, 1)
    assert world.drain() == []


def test_a_task_that_keeps_killing_its_worker_ends_after_max_attempts(world: World) -> None:
    task = world.schedule()
    ref = TaskRef.of(task)
    limit = world.config.timeouts.claim + world.config.timeouts.lease_floor + 2
    for _ in range(task.max_attempts):
        world.consumer.poll()
        [message] = world.drain()
        assert world.store.transition(ref, lifecycle.CLAIM, Change(now=world.now, attempt=message.attempt)).applied
        world.advance(1)
        if _ < task.max_attempts - 1:
            poll_until_requeued(world, limit)
    for _ in range(int(limit)):
        world.advance(1)
        if world.consumer.poll().total(Event.EXHAUSTED):
            break
    final = world.store.get(task.id)
    assert final is not None and final.status is TaskStatus.FATAL_FAILURE
    assert final.attempt == task.max_attempts and "lost" in (final.reason or "")


def test_a_failing_chore_is_counted_and_logged_by_name_and_the_polls_go_on(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    fired: list[datetime] = []

    def fire_schedules(now: datetime, lookahead: float) -> None:
        raise RuntimeError("schedules item unreadable")

    def sweep_chains(now: datetime, lookahead: float) -> None:
        fired.append(now)

    task = world.schedule()
    consumer = Consumer(world.store, world.sqs, world.config, clock=lambda: world.now,
                        housekeeping=[fire_schedules, sweep_chains])  # fmt: skip
    report = consumer.poll()
    assert report.total(Event.HOUSEKEEPING_FAILED) == 1 and report.total(Event.ERROR) == 0
    assert report.total(Event.ENQUEUED) == 1 and [m.task_id for m in world.drain()] == [task.id]
    assert fired == [world.now]  # the next chore still ran
    assert any("housekeeping" in r.getMessage() and "fire_schedules" in r.getMessage() for r in caplog.records)


def throttled(operation: str) -> ClientError:
    return ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, operation)


def test_a_write_throttled_partway_through_a_batch_sends_the_tasks_recorded_before_it(
    recording: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given five due tasks, and a store whose third enqueue write is throttled
    tasks = [recording.schedule(delay_seconds=i / 1000) for i in range(5)]
    writes = {"enqueue": 0}
    transition = recording.store.transition

    def third_throttled(ref: TaskRef, which: lifecycle.Transition, change: Change) -> Any:
        if which is lifecycle.ENQUEUE:
            writes["enqueue"] += 1
            if writes["enqueue"] == 3:
                raise throttled("UpdateItem")
        return transition(ref, which, change)

    monkeypatch.setattr(recording.store, "transition", third_throttled)
    recording.advance(1)
    # When a poll meets the throttle
    report = recording.consumer.poll()
    # Then the two tasks written as enqueued before it are sent in this poll, not left to the enqueue timeout
    assert report.total(Event.ERROR) == 1
    sent = {message.task_id for message in recording.drain()}
    recorded = {t.id for t in tasks if recording.status(t) is TaskStatus.ENQUEUED}
    assert len(recorded) == 2 and sent == recorded
    # And the next poll sends the rest, each task once
    assert recording.consumer.poll().total(Event.ENQUEUED) == 3
    assert {m.task_id for m in recording.drain()} == {t.id for t in tasks} - sent


def test_a_send_that_raises_hands_its_recorded_tasks_back_for_the_next_poll(
    recording: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given three due tasks, and an SQS whose next SendMessageBatch raises
    tasks = [recording.schedule() for _ in range(3)]
    send = recording.sqs.send_message_batch
    calls = {"n": 0}

    def first_raises(**kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise throttled("SendMessageBatch")
        return send(**kwargs)

    monkeypatch.setattr(recording.sqs, "send_message_batch", first_raises)
    # When a poll's send raises
    report = recording.consumer.poll()
    # Then its tasks are handed back as new (not left enqueued until the enqueue timeout)
    assert report.total(Event.ERROR) == 1 and report.total(Event.SEND_FAILED) == 3
    assert [recording.status(t) for t in tasks] == [TaskStatus.NEW] * 3
    # And the next poll, with no time passed, sends each once, and each is claimed once
    assert recording.consumer.poll().total(Event.ENQUEUED) == 3
    assert recording.claim_all() == 3


@pytest.mark.parametrize("mode", ["world", "recording"])
def test_a_poll_covering_the_hand_over_sends_what_falls_due_before_the_next_invocation(
    mode: str, request: pytest.FixtureRequest
) -> None:
    given: World = request.getfixturevalue(mode)
    # Given a task due 3 s past the lookahead
    task = given.schedule(delay_seconds=given.config.lookahead + 3)
    assert given.consumer.poll().total(Event.ENQUEUED) == 0
    # When an invocation's last poll reads 3 s further (to the next invocation's first poll)
    assert given.consumer.poll(handover_s=3).total(Event.ENQUEUED) == 1
    # Then the task is sent now, carrying its due time (the worker holds it until then)
    [message] = given.drain()
    assert (message.task_id, message.due_ms) == (task.id, to_ms(task.scheduled_at))
    assert given.status(task) is (TaskStatus.ENQUEUED if mode == "recording" else TaskStatus.NEW)
    # And the next invocation, in the same environment, does not send it again when it falls due
    given.advance(given.config.lookahead + 3)
    assert given.consumer.poll().total(Event.ENQUEUED) == 0


def test_a_task_sent_early_whose_send_raises_is_handed_back_at_its_due_time(
    recording: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a task due 3 s past the lookahead, read ahead by a hand-over poll whose send raises
    task = recording.schedule(delay_seconds=recording.config.lookahead + 3)
    send = recording.sqs.send_message_batch
    monkeypatch.setattr(recording.sqs, "send_message_batch", lambda **_: (_ for _ in ()).throw(throttled("Send")))
    assert recording.consumer.poll(handover_s=3).total(Event.SEND_FAILED) == 1
    monkeypatch.setattr(recording.sqs, "send_message_batch", send)
    # Then it is handed back at its due time, not now: it is not sent again before it is due
    handed_back = recording.store.get(task.id)
    assert handed_back is not None and handed_back.next_at == task.scheduled_at
    assert recording.consumer.poll().total(Event.ENQUEUED) == 0
    # And once due (within the lookahead), it is sent carrying its due time
    recording.advance(3)
    assert recording.consumer.poll().total(Event.ENQUEUED) == 1
    [message] = recording.drain()
    assert message.due_ms == to_ms(task.scheduled_at)


def test_the_hand_over_poll_may_fill_a_queue_past_its_steady_bound(aws: Any, config: StackConfig) -> None:
    # Given a queue bounded at 2 in flight, and four tasks due past the lookahead
    world = World(aws, config.model_copy(update={"max_in_flight_per_queue": 2}))
    for _ in range(4):
        world.schedule(delay_seconds=world.config.lookahead + 2)
    # When an invocation's last poll reads 3 s further (more than the time a message is planned in flight)
    report = world.consumer.poll(handover_s=3)
    # Then the queue takes all four (at most twice its bound), for the workers to hold until they are due
    assert report.total(Event.ENQUEUED) == 4 and len(world.drain()) == 4
    # And a regular poll, once the queue is read again empty, keeps the steady bound
    world.advance(1)
    for _ in range(4):
        world.schedule()
    assert world.consumer.poll().total(Event.ENQUEUED) == 2


def test_a_hand_back_that_fails_leaves_the_batch_recorded_and_the_other_failed_tasks_handed_back(
    recording: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given three due tasks, an SQS that refuses the first two messages of the batch, and a store whose first
    # hand-back write is throttled
    tasks = [recording.schedule(delay_seconds=i / 1000) for i in range(3)]
    send, sent_ids = recording.sqs.send_message_batch, list[list[str]]()

    def first_two_refused(**kwargs: Any) -> Any:
        sent_ids.append([TaskMessage.decode(e["MessageBody"]).task_id for e in kwargs["Entries"]])
        if len(sent_ids) > 1:
            return send(**kwargs)
        refused, kept = kwargs["Entries"][:2], kwargs["Entries"][2:]
        reply = send(**{**kwargs, "Entries": kept})
        reply["Failed"] = [{"Id": e["Id"], "SenderFault": False, "Code": "InternalError"} for e in refused]
        return reply

    releases = {"n": 0}
    transition = recording.store.transition

    def first_release_throttled(ref: TaskRef, which: lifecycle.Transition, change: Change) -> Any:
        if which is lifecycle.RELEASE:
            releases["n"] += 1
            if releases["n"] == 1:
                raise throttled("UpdateItem")
        return transition(ref, which, change)

    monkeypatch.setattr(recording.sqs, "send_message_batch", first_two_refused)
    monkeypatch.setattr(recording.store, "transition", first_release_throttled)
    recording.advance(1)
    # When a poll sends them (in the batch's order: the shards are read in turn, from a random one)
    report = recording.consumer.poll()
    [[not_handed_back, handed_back, kept]] = sent_ids
    # Then the poll counts the failed hand-back, the message sent is counted, and the other refused task is
    # handed back at once (only the one whose hand-back failed waits out the enqueue timeout)
    assert report.total(Event.ERROR) == 1 and report.total(Event.SEND_FAILED) == 2
    assert report.total(Event.ENQUEUED) == 1
    status = {t.id: recording.status(t) for t in tasks}
    assert status == {not_handed_back: TaskStatus.ENQUEUED, handed_back: TaskStatus.NEW, kept: TaskStatus.ENQUEUED}
    assert [m.task_id for m in recording.drain()] == [kept]
    # And the next poll sends the handed-back task, and only it
    assert recording.consumer.poll().total(Event.ENQUEUED) == 1
    assert [m.task_id for m in recording.drain()] == [handed_back]
