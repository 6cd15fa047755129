"""Singleton flow keys (issue 16 §1): one task per key at a time, a new one refused or replacing the waiting
holder, the key free again once its holder settles (moto in-process, one scheduler at a time; the race of two
schedulers is tests/e2e/test_singleton_keys.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from atf_core import lifecycle
from atf_core.config import LambdaSpec, StackConfig
from atf_core.deadletters import BulkResult, DeadLetterFilter, DeadLetters, position_of
from atf_core.errors import Conflict, FlowKeyBusy, InputError
from atf_core.lifecycle import Assoc
from atf_core.schema import ScheduleRequest, Task, TaskStatus
from atf_core.store.base import Change, CreateResult, TaskRef
from atf_core.store.codec import index_partition, shard_of
from atf_core.store.holders import holder_id
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling, build_task, task_id_for
from atf_sdk.transaction import task_entries
from tests.functional.helpers import T0
from tests.functional.test_flow_keys import keyed_config

HOUR = timedelta(hours=1)


@pytest.fixture
def singleton_config(config: StackConfig) -> StackConfig:
    return keyed_config(config, singleton=True)


class Keys:
    def __init__(self, aws: Any, config: StackConfig) -> None:
        self.config = config
        self.store = DynamoTaskStore(aws.dynamodb, config)
        self.scheduling = Scheduling(self.store, config, clock=lambda: T0)

    def schedule(self, flow_key: str = "customer-1", **body: Any) -> CreateResult:
        request = ScheduleRequest.model_validate({"lambda": "work", "flow_key": flow_key, **body})
        return self.scheduling.schedule(request, T0)

    def status(self, task: Task) -> TaskStatus:
        found = self.store.get(task.id)
        assert found is not None
        return found.status

    def claim(self, task: Task) -> None:
        assert self.store.transition(TaskRef.of(task), lifecycle.CLAIM, Change(now=T0, attempt=0)).applied

    def succeed(self, task: Task) -> None:
        assert self.store.transition(TaskRef.of(task), lifecycle.SUCCEED, Change(now=T0, attempt=1)).applied

    def succeed_after_claim(self, task: Task) -> None:
        self.claim(task)
        self.succeed(task)

    def dead_letter(self, task: Task) -> None:
        """Claimed, then failed for good: a dead letter, which frees the key."""
        self.claim(task)
        change = Change(now=T0, attempt=1, next_at=T0)
        assert self.store.transition(TaskRef.of(task), lifecycle.FAIL_TO_DEAD_LETTER, change).applied

    def redrive(self) -> BulkResult:
        return DeadLetters(self.store, self.config, clock=lambda: T0).redrive(DeadLetterFilter("work"), dry_run=False)


@pytest.fixture
def keys(aws: Any, singleton_config: StackConfig) -> Keys:
    return Keys(aws, singleton_config)


def test_a_second_task_while_the_first_waits_is_refused_naming_the_key_and_its_holder(keys: Keys) -> None:
    first = keys.schedule(payload={"n": 1}).task
    with pytest.raises(FlowKeyBusy) as caught:
        keys.schedule(payload={"n": 2}, key="second")
    assert caught.value.status == 409 and caught.value.code == "flow_key_busy" and caught.value.field == "flow_key"
    assert "'customer-1'" in caught.value.message and first.id in caught.value.message
    assert keys.store.get(task_id_for("work", "second")) is None  # nothing written
    assert keys.status(first) is TaskStatus.NEW


def test_a_running_holder_refuses_the_new_task_too(keys: Keys) -> None:
    first = keys.schedule().task
    keys.claim(first)
    with pytest.raises(FlowKeyBusy, match=f"held by task {first.id} \\(claimed\\)"):
        keys.schedule(key="second")
    with pytest.raises(FlowKeyBusy, match="has started: only a waiting task can be replaced"):
        keys.schedule(key="third", on_conflict="replace")
    assert keys.store.get(task_id_for("work", "third")) is None
    assert keys.status(first) is TaskStatus.CLAIMED


def test_replace_cancels_the_waiting_holder_and_takes_the_key(keys: Keys) -> None:
    first = keys.schedule(payload={"n": 1}).task
    second = keys.schedule(payload={"n": 2}, on_conflict="replace")
    assert second.created and second.replaced == first.id
    cancelled = keys.store.get(first.id)
    assert cancelled is not None and cancelled.status is TaskStatus.CANCELLED
    assert cancelled.reason is not None and second.task.id in cancelled.reason
    assert keys.store.key_holder("work", "customer-1") == second.task.id
    with pytest.raises(FlowKeyBusy, match=second.task.id):
        keys.schedule(payload={"n": 3})


class LateFirstLook(DynamoTaskStore):
    """The resent request's first look for its own task misses it: the first try commits just after."""

    def __init__(self, *args: Any, late_for: str) -> None:
        super().__init__(*args)
        self.late_for: str | None = late_for

    def get(self, task_id: str) -> Task | None:
        if task_id == self.late_for:
            self.late_for = None
            return None
        return super().get(task_id)


@pytest.mark.parametrize("on_conflict", ["refuse", "replace"])
def test_a_resent_request_racing_its_first_try_answers_that_try(aws: Any, keys: Keys, on_conflict: str) -> None:
    """Not refused as busy by its own task, nor a transaction that would cancel the task it creates."""
    older = keys.schedule(payload={"n": 1}).task if on_conflict == "replace" else None
    body = {"flow_key": "customer-1", "payload": {"n": 2}, "key": "resent", "on_conflict": on_conflict}
    first = keys.schedule(**body)
    late = LateFirstLook(aws.dynamodb, keys.config, late_for=first.task.id)
    resent = ScheduleRequest.model_validate({"lambda": "work", **body})
    again = Scheduling(late, keys.config, clock=lambda: T0).schedule(resent, T0)
    assert (again.created, again.task.id, again.replaced) == (False, first.task.id, older.id if older else None)
    assert keys.status(first.task) is TaskStatus.NEW and keys.store.key_holder("work", "customer-1") == first.task.id


def test_a_replace_sent_again_answers_what_it_replaced(keys: Keys) -> None:
    """The SDK resends a request whose answer was lost: the repeat must say what the first one replaced."""
    first = keys.schedule(payload={"n": 1}).task
    replacing = keys.schedule(payload={"n": 2}, key="again", on_conflict="replace")
    repeat = keys.schedule(payload={"n": 2}, key="again", on_conflict="replace")
    assert replacing.created and not repeat.created
    assert repeat.task.id == replacing.task.id and repeat.replaced == replacing.replaced == first.id
    assert keys.status(first) is TaskStatus.CANCELLED


@pytest.mark.parametrize("end", ["succeed", "cancel", "gone"])
def test_the_key_is_free_once_its_holder_settles_or_is_gone(keys: Keys, end: str) -> None:
    first = keys.schedule().task
    if end == "succeed":
        keys.claim(first)
        keys.succeed(first)
    elif end == "cancel":
        keys.scheduling.cancel(first.id)
    else:
        keys.store._table.delete(first.id)  # its retention ran out: DynamoDB's TTL removed the item
    second = keys.schedule()
    assert second.created and second.replaced is None
    assert keys.store.key_holder("work", "customer-1") == second.task.id


def test_keys_are_apart_and_keyless_tasks_are_not_held(keys: Keys) -> None:
    keys.schedule("customer-1")
    assert keys.schedule("customer-2").created
    plain = ScheduleRequest.model_validate({"lambda": "work"})
    assert keys.scheduling.schedule(plain).created and keys.scheduling.schedule(plain).created


def test_a_replayed_request_answers_its_task_and_a_different_one_with_its_key_conflicts(keys: Keys) -> None:
    first = keys.schedule(key="k1", payload={"n": 1})
    again = keys.schedule(key="k1", payload={"n": 1}, on_conflict="replace")
    assert not again.created and again.task.id == first.task.id and again.replaced is None
    assert keys.status(first.task) is TaskStatus.NEW  # not replaced by its own replay
    with pytest.raises(Conflict, match="used for a different request"):
        keys.schedule(key="k1", payload={"n": 2})


def test_a_replace_fenced_out_by_a_claim_in_between_is_refused_and_writes_nothing(keys: Keys) -> None:
    """The holder is claimed between the scheduler's read and its transaction: the cancel's condition fails,
    the scheduler reads again, finds it started and refuses; the claimed task runs on, alone."""
    first = keys.schedule().task
    take = keys.store.create_holding

    def claimed_meanwhile(*args: Any) -> CreateResult | None:
        if keys.status(first) is TaskStatus.NEW:
            keys.claim(first)
        return take(*args)

    keys.store.create_holding = claimed_meanwhile  # type: ignore[method-assign]
    with pytest.raises(FlowKeyBusy, match="has started"):
        keys.schedule(key="late", on_conflict="replace")
    assert keys.store.get(task_id_for("work", "late")) is None
    assert keys.status(first) is TaskStatus.CLAIMED
    assert keys.store.key_holder("work", "customer-1") == first.id


def test_a_holder_taken_by_another_scheduler_in_between_refuses_the_stale_write(keys: Keys) -> None:
    """The store's transaction is fenced on the holder it read: a stale read cannot make a second holder."""
    first = keys.schedule().task
    keys.scheduling.cancel(first.id)
    stale = keys.store.key_holder("work", "customer-1")
    second = keys.schedule().task
    request = ScheduleRequest.model_validate({"lambda": "work", "flow_key": "customer-1", "key": "late"})
    built = build_task(keys.config, request, T0)
    assert keys.store.create_holding(built, request.fingerprint(), stale, None) is None
    assert keys.store.get(built.id) is None
    assert keys.store.key_holder("work", "customer-1") == second.id


def test_on_conflict_needs_a_singleton_key(aws: Any, config: StackConfig, keys: Keys) -> None:
    with pytest.raises(ValidationError, match="on_conflict applies to a task with a flow_key"):
        ScheduleRequest.model_validate({"lambda": "work", "on_conflict": "replace"})
    with pytest.raises(ValidationError) as caught:
        ScheduleRequest.model_validate({"lambda": "work", "flow_key": "a", "on_conflict": "bogus"})
    assert [e["loc"] for e in caught.value.errors()] == [("on_conflict",)]
    plain = Scheduling(DynamoTaskStore(aws.dynamodb, config), config)
    request = ScheduleRequest.model_validate({"lambda": "work", "flow_key": "a", "on_conflict": "refuse"})
    with pytest.raises(InputError) as refused:
        plain.schedule(request, T0)
    assert refused.value.field == "on_conflict" and "singleton" in refused.value.message


def test_singleton_alone_is_a_key_limit() -> None:
    spec = LambdaSpec.model_validate({"key_limits": {"singleton": True}})
    assert spec.key_limits is not None and spec.key_limits.singleton and spec.key_limits.max_running is None


def test_a_singleton_key_is_not_taken_inside_a_callers_transaction(singleton_config: StackConfig) -> None:
    with pytest.raises(InputError) as caught:
        task_entries(singleton_config, {"lambda": "work", "flow_key": "a"})
    assert caught.value.field == "flow_key"


def test_the_holder_item_is_not_a_task(keys: Keys) -> None:
    keys.schedule()
    assert keys.store.get(holder_id("work", "customer-1")) is None


def test_a_redriven_dead_letter_takes_its_key_again(keys: Keys) -> None:
    dead = keys.schedule().task
    keys.dead_letter(dead)
    done = keys.redrive()
    assert (done.changed, done.key_busy) == (1, [])
    assert keys.status(dead) is TaskStatus.NEW and keys.store.key_holder("work", "customer-1") == dead.id
    with pytest.raises(FlowKeyBusy, match=dead.id):
        keys.schedule(payload={"n": 2})


def test_a_dead_letter_whose_key_another_task_took_stays_dead_and_is_named(keys: Keys) -> None:
    """Redriving it would run two tasks of one singleton key at once."""
    dead = keys.schedule().task
    keys.dead_letter(dead)
    successor = keys.schedule(payload={"n": 2}).task  # the key was free: the dead letter had settled
    done = keys.redrive()
    assert (done.changed, done.key_busy) == (0, [dead.id])
    assert keys.status(dead) is TaskStatus.DEAD_LETTER
    assert keys.store.key_holder("work", "customer-1") == successor.id
    keys.succeed_after_claim(successor)
    assert keys.redrive().changed == 1 and keys.store.key_holder("work", "customer-1") == dead.id


def test_a_redrive_goes_on_past_the_dead_letters_whose_keys_are_held_from_its_next(keys: Keys) -> None:
    # Given three dead letters, the two oldest (by position) with keys new tasks took meanwhile
    letters = []
    for n in range(3):
        dead = keys.schedule(flow_key=f"customer-{n}").task
        keys.dead_letter(dead)
        letters.append(dead)
    ordered = sorted(letters, key=lambda t: t.id)  # they died in one millisecond: listed in id order
    for held in ordered[:2]:
        keys.schedule(flow_key=held.flow_key, payload={"n": 2})
    dead_letters = DeadLetters(keys.store, keys.config, clock=lambda: T0)
    # When a redrive of the oldest two reaches only those
    first = dead_letters.redrive(DeadLetterFilter("work", limit=2), dry_run=False)
    assert (first.changed, first.key_busy, first.more) == (0, [t.id for t in ordered[:2]], True)
    assert first.next is not None
    # Then calling again from its next goes on past them, and redrives the third
    rest = dead_letters.redrive(DeadLetterFilter("work", limit=2), dry_run=False, after=position_of(first.next))
    assert ([d.id for d in rest.matched], rest.changed, rest.more, rest.next) == ([ordered[2].id], 1, False, None)
    assert [keys.status(t) for t in ordered] == [TaskStatus.DEAD_LETTER] * 2 + [TaskStatus.NEW]
    # And a discard goes on from a next the same way
    gone = dead_letters.discard(DeadLetterFilter("work", limit=1), dry_run=False, after=position_of(first.next))
    assert (gone.matched, gone.changed) == ([], 0)
    second = dead_letters.discard(DeadLetterFilter("work", limit=1), dry_run=True)
    assert [d.id for d in second.matched] == [ordered[0].id] and second.more
    last = dead_letters.discard(DeadLetterFilter("work", limit=1), dry_run=False, after=position_of(second.next or ""))
    assert ([d.id for d in last.matched], last.changed) == ([ordered[1].id], 1)


def test_a_dry_run_redrive_names_the_dead_letters_a_real_one_would_leave_dead(keys: Keys) -> None:
    # Given two dead letters of one key, and a dead letter of another key that a new task took meanwhile
    first = keys.schedule().task
    keys.dead_letter(first)
    second = keys.schedule(payload={"n": 2}).task
    keys.dead_letter(second)
    other = keys.schedule(flow_key="customer-2").task
    keys.dead_letter(other)
    keys.schedule(flow_key="customer-2", payload={"n": 3})
    # When a dry run looks, then a real run redrives
    dry = DeadLetters(keys.store, keys.config, clock=lambda: T0).redrive(DeadLetterFilter("work"), dry_run=True)
    real = keys.redrive()
    # Then the dry run named what the real run left dead: one of customer-1's two, and customer-2's
    assert dry.changed == 0 and len(dry.key_busy) == 2 and other.id in dry.key_busy
    assert sorted(dry.key_busy) == sorted(real.key_busy) and real.changed == 1


def test_a_redriven_keyed_task_returns_to_its_keys_shard(keys: Keys) -> None:
    """Its entries stay where a selection by flow key and the fair share look for them."""
    shards = keys.config.shards_of("work")
    assert shards > 1
    key = next(
        k
        for k in map(str, range(100))
        if shard_of(task_id_for("work", k), shards) != shard_of("", shards, "customer-1")
    )
    dead = keys.schedule(key=key).task  # its id's shard is not its flow key's: a redrive by id would move it
    keys.dead_letter(dead)
    keys.redrive()
    shard = shard_of(dead.id, shards, "customer-1")
    entries = keys.store.entries(index_partition(Assoc.NEW, "work", dead.priority, shard), T0 - HOUR, T0 + HOUR)
    assert [e.id for e in entries] == [dead.id]


def test_a_periodic_schedule_with_a_singleton_key_skips_an_occurrence_while_the_key_is_held(
    aws: Any, keys: Keys
) -> None:
    from atf_core.periodic_schedules import Schedules
    from atf_core.recurrence import ScheduleSpec
    from atf_core.store.items import ItemStore

    schedules = Schedules(keys.store, ItemStore(aws.dynamodb, keys.config.table_name), keys.config, clock=lambda: T0)
    spec = ScheduleSpec.model_validate(
        {"lambda": "work", "every_seconds": 10, "overlap": "allow", "flow_key": "customer-1"}
    )
    schedules.put("sync", spec, now=T0)
    # Given its first occurrence's task holds the key
    assert schedules.fire_due(T0 + timedelta(seconds=10)).created == 1
    first = keys.store.get(schedules.get("sync").last_task_id or "")
    assert first is not None and first.flow_key == "customer-1"
    # When the next occurs while that task still waits: skipped, and the schedule goes on
    report = schedules.fire_due(T0 + timedelta(seconds=20))
    assert (report.created, report.skipped) == (0, 1)
    assert schedules.get("sync").next_occurrence == T0 + timedelta(seconds=30)
    # Then, once the holder has run, the following occurrence takes the key
    keys.succeed_after_claim(first)
    assert schedules.fire_due(T0 + timedelta(seconds=30)).created == 1


def test_a_schedules_flow_key_follows_a_flow_keys_rules() -> None:
    from atf_core.recurrence import ScheduleSpec

    with pytest.raises(ValidationError, match="flow_key"):
        ScheduleSpec.model_validate({"lambda": "work", "every_seconds": 10, "flow_key": "no spaces"})
