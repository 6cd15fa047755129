"""A bulk action's selection, read past what its filter leaves out and paged with a cursor.

The status filter is applied before the limit: tasks of another status ahead of the selected ones no
longer fill the limit with nothing (an empty answer saying `more`, the same on every call). And an answer
with `more` carries a cursor that goes on where it stopped: a reschedule paged with it moves each task
once, the drip going on across the calls, even when the tasks it moved are now the soonest."""

from __future__ import annotations

import itertools
import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest

from atf_core import bulk, lifecycle
from atf_core.bulk import BulkChange, BulkChanges, task_filter
from atf_core.bulk_cursor import Cursor, Drip
from atf_core.config import StackConfig
from atf_core.errors import InputError
from atf_core.schema import ScheduleRequest, Task, TaskStatus, utcnow
from atf_core.store.base import Change, TaskRef
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling

S = TaskStatus


def _soon(minutes: float) -> datetime:
    return (utcnow() + timedelta(minutes=minutes)).replace(microsecond=0)


def _waiting(
    store: DynamoTaskStore, config: StackConfig, collection: str, minutes: list[float], **fields: str
) -> list[Task]:
    """New `work` tasks of the collection, running at those minutes from now: by default on every priority and
    shard; with a priority and a flow key, all in one index partition."""
    priorities = ("high", "normal", "low")
    tasks: list[str] = []
    for n, at in enumerate(minutes):
        body = {
            "lambda": "work",
            "collection": collection,
            "priority": priorities[n % 3],
            "run_at": _soon(at),
            **fields,
        }
        tasks.append(Scheduling(store, config).schedule(ScheduleRequest.model_validate(body)).task.id)
    stored = store.get_many(tasks)  # as stored: with their index entry's time, soonest first
    return sorted(stored, key=lambda t: (t.next_at, t.id))


def _enqueued(store: DynamoTaskStore, task: Task) -> Task:
    outcome = store.transition(TaskRef.of(task), lifecycle.ENQUEUE, Change(now=utcnow()))
    assert outcome.applied and outcome.task is not None
    return outcome.task


@pytest.fixture
def store(aws: Any, config: StackConfig) -> DynamoTaskStore:
    return DynamoTaskStore(aws.dynamodb, config)


@pytest.fixture
def collection() -> str:
    return f"paged-{uuid.uuid4().hex[:8]}"


def test_the_status_filter_finds_an_enqueued_task_behind_more_new_ones_than_the_limit(
    store: DynamoTaskStore, config: StackConfig, collection: str
) -> None:
    # Given three new tasks (limit + 1) ahead of one enqueued task, all in one index partition (the new one's)
    limit = 2
    *_, last = _waiting(store, config, collection, [10, 11, 12, 20], priority="normal", flow_key="one-shard")
    enqueued = _enqueued(store, last)
    # When the enqueued ones of the collection are selected, `limit` at most
    selection = task_filter("work", collection, frozenset({S.ENQUEUED}), limit=limit)
    found = BulkChanges(store, config).cancel(selection, dry_run=True)
    # Then it is found, and nothing more is said to match
    assert ([t.id for t in found.matched], found.more) == ([enqueued.id], False)
    assert found.cursor is None


def test_a_call_bounded_in_what_it_examines_goes_on_with_a_cursor_never_the_same_empty_answer(
    store: DynamoTaskStore, config: StackConfig, collection: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given five new tasks ahead of an enqueued one, and calls that examine two entries at most
    monkeypatch.setattr(bulk, "READ_BATCH", 2)
    monkeypatch.setattr(bulk, "EXAMINED_PER_LIMIT", 2)
    *_, last = _waiting(store, config, collection, [10, 11, 12, 13, 14, 20], priority="normal", flow_key="one")
    enqueued = _enqueued(store, last)
    selection = task_filter("work", collection, frozenset({S.ENQUEUED}), limit=1)
    # When the selection is called for again with each answer's cursor, until no more
    answers = _paged(lambda cursor: BulkChanges(store, config).cancel(selection, True, cursor=cursor))
    # Then each empty answer moved on (a cursor of its own), and the last found the enqueued task
    assert [([t.id for t in a.matched], a.more) for a in answers] == [([], True), ([], True), ([enqueued.id], False)]
    assert len({a.cursor for a in answers}) == 3


def _paged(call: Any, calls_at_most: int = 20) -> list[BulkChange]:
    """Each answer of `call(cursor)`, starting without a cursor and going on with the last one's, until no more."""
    answers: list[BulkChange] = [call(None)]
    while answers[-1].more:
        assert answers[-1].cursor is not None, "an answer with more says where to go on"
        assert len(answers) < calls_at_most, "the calls never got through the selection"
        answers.append(call(answers[-1].cursor))
    return answers


@pytest.mark.parametrize(
    ("run_at_minutes", "out_of_time"),
    [(1, False), (1, True), (12.5, False), (60, False)],
    ids=["earlier-than-all", "earlier-out-of-time", "amid-them", "later-than-all"],
)
def test_a_reschedule_paged_with_its_cursor_moves_each_task_once_dripping_on(
    store: DynamoTaskStore,
    config: StackConfig,
    collection: str,
    monkeypatch: pytest.MonkeyPatch,
    run_at_minutes: float,
    out_of_time: bool,
) -> None:
    # Given five waiting tasks, ten to fourteen minutes ahead, and calls of two at most (or out of time at once)
    tasks = _waiting(store, config, collection, [10, 11, 12, 13, 14])
    if out_of_time:
        monkeypatch.setattr(bulk, "RUN_BUDGET_S", 0.0)
    selection, run_at = task_filter("work", collection, limit=2), _soon(run_at_minutes)
    # When they are rescheduled at 2 a second from run_at, calling again with each answer's cursor
    changes = BulkChanges(store, config)
    answers = _paged(lambda cursor: changes.reschedule(selection, run_at, False, per_second=2, cursor=cursor))
    # Then each task was moved exactly once, the whole selection, in its order
    moved = [t.id for a in answers for t in a.matched]
    assert moved == [t.id for t in tasks]
    assert sum(a.changed for a in answers) == 5 and not any(a.skipped for a in answers)
    # and each runs at its own drip time: the drip went on across the calls, not restarting at run_at
    after = {t.id: t.next_at for t in store.get_many(moved)}
    assert [after[i] for i in moved] == [run_at + timedelta(seconds=n / 2) for n in range(5)]


def test_a_slow_reschedule_paged_with_its_cursor_moves_the_tasks_its_drip_passes_over(
    store: DynamoTaskStore, config: StackConfig, collection: str
) -> None:
    # Given five tasks 12 s apart, rescheduled from 6 s after the first at one a minute, two a call: the
    # first call's slots (a minute apart) span the other tasks, which have yet to be reached
    tasks = _waiting(store, config, collection, [10, 10.2, 10.4, 10.6, 10.8])
    selection, run_at = task_filter("work", collection, limit=2), _soon(10.1)
    changes = BulkChanges(store, config)
    answers = _paged(lambda cursor: changes.reschedule(selection, run_at, False, per_second=1 / 60, cursor=cursor))
    # Then every task is moved once, each to its own slot a minute apart
    moved = [t.id for a in answers for t in a.matched]
    assert moved == [t.id for t in tasks] and sum(a.changed for a in answers) == 5
    after = {t.id: t.next_at for t in store.get_many(moved)}
    assert [after[i] for i in moved] == [run_at + timedelta(minutes=n) for n in range(5)]


def test_a_continued_reschedule_goes_on_with_its_first_calls_run_time_and_rate(
    store: DynamoTaskStore, config: StackConfig, collection: str
) -> None:
    # Given a reschedule of four tasks, two a call, whose calls repeat a delay (a later run time each call)
    tasks = _waiting(store, config, collection, [10, 11, 12, 13])
    selection, changes = task_filter("work", collection, limit=2), BulkChanges(store, config)
    first = changes.reschedule(selection, _soon(1), False, per_second=1)
    rest = changes.reschedule(selection, _soon(2), False, per_second=5, cursor=first.cursor)
    # Then the second call drips on from the first's run time, at its rate
    assert not rest.more and [t.id for t in first.matched + rest.matched] == [t.id for t in tasks]
    after = sorted(t.next_at for t in store.get_many([t.id for t in tasks]) if t.next_at is not None)
    assert [(b - a).total_seconds() for a, b in itertools.pairwise(after)] == [1.0, 1.0, 1.0]


def test_a_paged_reprioritise_drips_on_across_its_calls(
    store: DynamoTaskStore, config: StackConfig, collection: str
) -> None:
    # Given four low tasks due now, reprioritised to high one a second, two a call
    tasks = _waiting(store, config, collection, [-1, -1, -1, -1], priority="low")
    selection, changes = task_filter("work", collection, limit=2), BulkChanges(store, config)
    answers = _paged(lambda cursor: changes.reprioritise(selection, "high", False, per_second=1, cursor=cursor))
    # Then the four run a second apart, not two by two
    assert sum(a.changed for a in answers) == 4
    after = sorted(t.next_at for t in store.get_many([t.id for t in tasks]) if t.next_at is not None)
    assert [round((b - a).total_seconds(), 1) for a, b in itertools.pairwise(after)] == [1.0, 1.0, 1.0]


def test_a_dry_runs_cursor_is_refused_by_a_real_run_and_nothing_changes(
    store: DynamoTaskStore, config: StackConfig, collection: str
) -> None:
    tasks = _waiting(store, config, collection, [10, 11, 12])
    selection, changes = task_filter("work", collection, limit=2), BulkChanges(store, config)
    dry = changes.cancel(selection, True)
    with pytest.raises(InputError) as refused:
        changes.cancel(selection, False, cursor=dry.cursor)
    assert refused.value.field == "cursor" and {t.status for t in store.get_many([t.id for t in tasks])} == {S.NEW}


def test_a_cursor_past_the_windows_end_selects_nothing_without_reading_a_range_that_ends_before_it_starts(
    store: DynamoTaskStore, config: StackConfig, collection: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a paged dry run without a window, and its cursor then given with a window that ends before it
    _waiting(store, config, collection, [10, 11, 12])
    changes = BulkChanges(store, config)
    dry = changes.cancel(task_filter("work", collection, limit=1), True)
    reads: list[tuple[datetime, datetime]] = []
    entries = store.entries
    monkeypatch.setattr(
        store, "entries", lambda p, low, high, eq=None: reads.append((low, high)) or entries(p, low, high, eq)
    )
    narrowed = task_filter("work", collection, until=_soon(5), limit=1)
    # Then it selects nothing, and no index read has its start after its end (DynamoDB refuses one)
    assert changes.cancel(narrowed, True, cursor=dry.cursor).matched == []
    assert all(low <= high for low, high in reads)


def test_a_dry_run_cancel_paged_with_its_cursor_lists_every_task_once(
    store: DynamoTaskStore, config: StackConfig, collection: str
) -> None:
    # Given seven waiting tasks, two of them at the same minute
    tasks = _waiting(store, config, collection, [10, 11, 11, 12, 13, 14, 15])
    selection = task_filter("work", collection, limit=3)
    # When the cancel is paged through as a dry run, with each answer's cursor
    answers = _paged(lambda cursor: BulkChanges(store, config).cancel(selection, True, cursor=cursor))
    # Then the pages list every task once, soonest first, and nothing changed
    listed = [t.id for a in answers for t in a.matched]
    assert (listed, [len(a.matched) for a in answers]) == ([t.id for t in tasks], [3, 3, 1])
    assert {t.status for t in store.get_many(listed)} == {S.NEW}


@pytest.mark.parametrize(
    "cursor",
    [
        "not a cursor",
        "e30",  # {}
        Cursor("reschedule", (1, "x"), False, Drip(1, 2, 3)).encode() + "=",  # padded: not what an answer gives
        Cursor("cancel", (1, "x"), False).encode(),  # another action's
        Cursor("reschedule", (1, "x"), True, Drip(1, 2, 3)).encode(),  # a dry run's
        Cursor("reschedule", (1, "x"), False, Drip(1, 0, 3)).encode(),  # a rate of 0
    ],
)
def test_a_cursor_not_one_a_reschedule_answered_is_refused_naming_it_and_nothing_changes(
    store: DynamoTaskStore, config: StackConfig, collection: str, cursor: str
) -> None:
    # Given a waiting task
    (task,) = _waiting(store, config, collection, [10])
    # When a reschedule is given a mangled cursor, or one of a cancel
    with pytest.raises(InputError) as refused:
        BulkChanges(store, config).reschedule(task_filter("work", collection), _soon(1), False, cursor=cursor)
    # Then it is refused, naming the field, and the task is where it was
    assert refused.value.field == "cursor" and refused.value.code == "invalid_input"
    assert store.get(task.id) == task
