"""ATF's state table, applied by the DynamoDB store: every legal transition
applies, every illegal one is rejected and leaves the item as it was."""

from __future__ import annotations

import itertools

import pytest

from atf_core import lifecycle
from atf_core.config import StackConfig
from atf_core.definitions import Attr
from atf_core.lifecycle import IndexEffect, Transition
from atf_core.schema import TaskError, TaskStatus, to_ms
from atf_core.store.base import Change, TaskRef
from atf_core.store.tasks import DynamoTaskStore
from tests.functional.helpers import T0, force_status, later, new_task, raw_item

PAIRS = list(itertools.product(TaskStatus, lifecycle.TRANSITIONS))


def _change(transition: Transition, attempt: int) -> Change:
    needs_time = transition.index is IndexEffect.MOVE
    return Change(
        now=later(5),
        attempt=attempt,
        next_at=later(30) if needs_time else None,
        error=TaskError(type="E", message="m", attempt=attempt, at=later(5)) if "fail" in transition.name else None,
    )


@pytest.fixture
def store(aws, config: StackConfig) -> DynamoTaskStore:  # type: ignore[no-untyped-def]
    return DynamoTaskStore(aws.dynamodb, config)


@pytest.mark.parametrize(("status", "transition"), PAIRS, ids=[f"{s.value}-{t.name}" for s, t in PAIRS])
def test_transition_applies_only_from_its_source_states(
    store: DynamoTaskStore, config: StackConfig, status: TaskStatus, transition: Transition
) -> None:
    # Given a task in `status`
    task = force_status(store, new_task(store, config), status, attempt=1)
    before = raw_item(store, task.id)
    # When the transition is applied by a writer that names the right attempt
    outcome = store.transition(TaskRef.of(task), transition, _change(transition, attempt=1))
    # Then it applies exactly when ATF's table allows it
    assert outcome.applied is transition.allows(status)
    after = raw_item(store, task.id)
    if not outcome.applied:
        assert after == before
        return
    assert after[Attr.STATUS] == transition.target.value
    assert after[Attr.ATTEMPT] == (2 if transition.bumps_attempt else 1)
    assert (Attr.INDEX_PK in after) is (transition.index is not IndexEffect.REMOVE)


@pytest.mark.parametrize("transition", [t for t in lifecycle.TRANSITIONS if t.fenced], ids=lambda t: t.name)
def test_a_stale_writer_is_rejected(store: DynamoTaskStore, config: StackConfig, transition: Transition) -> None:
    # Given a task in a state the transition accepts, now at attempt 2
    source = sorted(transition.sources)[0]
    task = force_status(store, new_task(store, config), source, attempt=2)
    before = raw_item(store, task.id)
    # When a writer acting for attempt 1 (a paused executor, an old message) writes
    outcome = store.transition(TaskRef.of(task), transition, _change(transition, attempt=1))
    # Then nothing changes
    assert not outcome.applied
    assert raw_item(store, task.id) == before


def test_a_retry_whose_first_try_succeeded_reconciles(store: DynamoTaskStore, config: StackConfig) -> None:
    task = force_status(store, new_task(store, config), TaskStatus.PROCESSING, attempt=1)
    change = _change(lifecycle.SUCCEED, attempt=1)
    first = store.transition(TaskRef.of(task), lifecycle.SUCCEED, change)
    # The same logical write again (botocore retrying after a lost response)
    retry = store.transition(TaskRef.of(task), lifecycle.SUCCEED, change)
    assert first.applied and retry.applied and retry.reconciled
    # while a different writer's identical request is refused
    other = store.transition(TaskRef.of(task), lifecycle.SUCCEED, _change(lifecycle.SUCCEED, attempt=1))
    assert not other.applied


def test_index_follows_the_state_table(store: DynamoTaskStore, config: StackConfig) -> None:
    task = new_task(store, config, delay_seconds=60)
    ref = TaskRef.of(task)
    item = raw_item(store, task.id)
    assert item[Attr.INDEX_PK].startswith("n#work#normal#") and item[Attr.INDEX_SK] == to_ms(later(60))
    # enqueue and claim leave the entry where it was (the deadline lives on the item)
    assert store.transition(ref, lifecycle.ENQUEUE, Change(now=later(60))).applied
    assert store.transition(ref, lifecycle.CLAIM, Change(now=later(61), attempt=0)).applied
    assert raw_item(store, task.id)[Attr.INDEX_SK] == to_ms(later(60))
    # a heartbeat moves it to heartbeat + timeout, in the started association
    beat = Change(now=later(62), attempt=1, next_at=later(72))
    assert store.transition(ref, lifecycle.HEARTBEAT, beat).applied
    item = raw_item(store, task.id)
    assert item[Attr.INDEX_PK].startswith("s#work#normal#") and item[Attr.INDEX_SK] == to_ms(later(72))
    # a retriable failure moves it to the backoff time; a terminal state removes it
    fail = Change(now=later(63), attempt=1, next_at=later(65), error=TaskError(type="E", message="x", attempt=1, at=T0))
    assert store.transition(ref, lifecycle.FAIL_RETRIABLE, fail).applied
    assert raw_item(store, task.id)[Attr.INDEX_SK] == to_ms(later(65))
    assert store.transition(ref, lifecycle.ENQUEUE, Change(now=later(65))).applied
    assert store.transition(ref, lifecycle.CLAIM, Change(now=later(66), attempt=1)).applied
    assert store.transition(ref, lifecycle.SUCCEED, Change(now=later(67), attempt=2)).applied
    item = raw_item(store, task.id)
    assert Attr.INDEX_PK not in item and Attr.INDEX_SK not in item
    assert item[Attr.STATUS] == "success" and item[Attr.ATTEMPT] == 2


def test_the_first_claim_is_kept_through_retries(store: DynamoTaskStore, config: StackConfig) -> None:
    # Given a task due at +60 s, first claimed at +61 s, failed, and claimed again at +90 s
    task = new_task(store, config, delay_seconds=60)
    ref = TaskRef.of(task)
    assert store.transition(ref, lifecycle.CLAIM, Change(now=later(61), attempt=0)).applied
    fail = Change(now=later(62), attempt=1, next_at=later(90), error=TaskError(type="E", message="x", attempt=1, at=T0))
    assert store.transition(ref, lifecycle.FAIL_RETRIABLE, fail).applied
    second = store.transition(ref, lifecycle.CLAIM, Change(now=later(90), attempt=1))
    # Then the task keeps when it first started beside its latest claim, and its start lag is the first one's
    assert second.applied and second.task is not None
    assert (second.task.first_claimed_at, second.task.claimed_at) == (later(61), later(90))
    assert second.task.start_lag_ms == 1_000


def test_enqueue_waits_for_the_due_time(store: DynamoTaskStore, config: StackConfig) -> None:
    task = new_task(store, config, delay_seconds=60)
    early = store.transition(TaskRef.of(task), lifecycle.ENQUEUE, Change(now=later(10), due_by=later(11)))
    assert not early.applied
    on_time = store.transition(TaskRef.of(task), lifecycle.ENQUEUE, Change(now=later(59.5), due_by=later(60.5)))
    assert on_time.applied
