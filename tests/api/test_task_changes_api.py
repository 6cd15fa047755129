"""Changing waiting tasks through the SDK on the quiet stack (no consumer, no worker): one task by id,
fenced against a claim; a selection by filter, cancel / reschedule / reprioritise, each with a dry run
that lists exactly what it would touch and changes nothing; stale messages refused; bad input refused."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from atf_core import lifecycle
from atf_core.errors import Conflict, InputError, UnknownPriority
from atf_core.schema import Task, TaskStatus, to_ms
from atf_core.store.base import Change, TaskRef
from atf_core.store.codec import shard_of
from atf_core.store.tasks import DynamoTaskStore
from atf_sdk.client import AtfClient
from tests.api.conftest import Raw
from tests.api.states import advance

S = TaskStatus


def _at(minutes: float) -> datetime:
    return (datetime.now(UTC) + timedelta(minutes=minutes)).replace(microsecond=0)


@pytest.fixture
def batch(client: AtfClient, store: DynamoTaskStore) -> dict[str, Any]:
    """In a collection of their own, `work` tasks: three waiting (at +10, +20, +30 min; high, normal, low), one
    claimed, one cancelled; and a waiting one in another collection."""
    collection = f"bulk-{uuid.uuid4().hex[:8]}"
    waiting = [
        client.schedule("work", {"n": i}, collection=collection, priority=p, run_at=_at(10 * (i + 1))).id
        for i, p in enumerate(("high", "normal", "low"))
    ]
    claimed = client.schedule("work", collection=collection).id
    advance(store, claimed, S.CLAIMED)
    cancelled = client.schedule("work", collection=collection, run_at=_at(5)).id
    client.cancel(cancelled)
    other = client.schedule("work", collection=f"{collection}-x", run_at=_at(10)).id
    return {"collection": collection, "waiting": waiting, "claimed": claimed, "cancelled": cancelled, "other": other}


def _states(client: AtfClient, ids: list[str]) -> list[Task]:
    return [client.get(i) for i in ids]


def _all_ids(b: dict[str, Any]) -> list[str]:
    return [*b["waiting"], b["claimed"], b["cancelled"], b["other"]]


def test_a_dry_run_lists_exactly_the_waiting_tasks_of_the_selection_and_changes_nothing(
    client: AtfClient, batch: dict[str, Any]
) -> None:
    before = _states(client, _all_ids(batch))
    for dry in (
        client.bulk_cancel(lambda_name="work", collection=batch["collection"], dry_run=True),
        client.bulk_reschedule(collection=batch["collection"], delay_seconds=60, dry_run=True, per_second=2),
        client.bulk_reprioritise("normal", lambda_name="work", collection=batch["collection"], dry_run=True),
    ):
        assert dry.dry_run and dry.changed == 0 and not dry.more
    assert [t.id for t in client.bulk_cancel(collection=batch["collection"], dry_run=True).matched] == batch["waiting"]
    moved = client.bulk_reprioritise("normal", lambda_name="work", collection=batch["collection"], dry_run=True)
    assert [t.id for t in moved.matched] == [batch["waiting"][0], batch["waiting"][2]], "not those already normal"
    assert _states(client, _all_ids(batch)) == before, "a dry run writes nothing"


def test_a_reschedule_moves_exactly_the_selection_spread_at_the_rate(client: AtfClient, batch: dict[str, Any]) -> None:
    run_at = _at(90)
    done = client.bulk_reschedule(collection=batch["collection"], run_at=run_at, per_second=2)
    assert (done.changed, done.skipped) == (3, [])
    assert [t.id for t in done.matched] == batch["waiting"]
    expected = [run_at + timedelta(seconds=i / 2) for i in range(3)]
    assert (done.first_at, done.last_at) == (expected[0], expected[-1])
    after = _states(client, batch["waiting"])
    assert [(t.next_at, t.scheduled_at, t.status) for t in after] == [(e, e, S.NEW) for e in expected]
    assert [t.priority for t in after] == ["high", "normal", "low"]
    untouched = _states(client, [batch["claimed"], batch["cancelled"], batch["other"]])
    assert [t.status for t in untouched] == [S.CLAIMED, S.CANCELLED, S.NEW]
    assert untouched[2].next_at == untouched[2].scheduled_at != run_at


@pytest.mark.parametrize("dry_run", [True, False])
@pytest.mark.parametrize("change", ["reschedule", "reprioritise"])
def test_a_drip_rate_that_would_run_the_last_task_over_a_year_ahead_is_refused_changing_nothing(
    client: AtfClient, batch: dict[str, Any], change: str, dry_run: bool
) -> None:
    # Given three waiting tasks, and a rate of one a year (3e-8 a second)
    before, selection = _states(client, _all_ids(batch)), {"collection": batch["collection"], "per_second": 3e-8}
    # When they are rescheduled or moved at that rate, as a dry run or for real
    with pytest.raises(InputError) as refused:
        if change == "reschedule":
            client.bulk_reschedule(delay_seconds=60, dry_run=dry_run, **selection)
        else:
            client.bulk_reprioritise("normal", lambda_name="work", dry_run=dry_run, **selection)
    # Then it is refused, naming the rate, and nothing changed
    assert refused.value.field == "per_second" and "more than a year ahead" in refused.value.message
    assert _states(client, _all_ids(batch)) == before


def test_a_window_on_the_run_time_selects_and_cancels_only_those(client: AtfClient, batch: dict[str, Any]) -> None:
    first, middle, last = _states(client, batch["waiting"])
    assert first.next_at and middle.next_at and last.next_at
    window = {"since": first.next_at + timedelta(seconds=1), "until": last.next_at - timedelta(seconds=1)}
    done = client.bulk_cancel(collection=batch["collection"], **window)
    assert ([t.id for t in done.matched], done.changed) == ([middle.id], 1)
    assert [t.status for t in _states(client, batch["waiting"])] == [S.NEW, S.CANCELLED, S.NEW]


def test_a_reprioritised_selection_moves_to_the_other_priority_and_later(
    client: AtfClient, batch: dict[str, Any]
) -> None:
    before = {t.id: t for t in _states(client, batch["waiting"])}
    done = client.bulk_reprioritise("low", lambda_name="work", collection=batch["collection"])
    assert ([t.id for t in done.matched], done.changed) == (batch["waiting"][:2], 2)
    for task in _states(client, batch["waiting"]):
        old = before[task.id]
        assert task.priority == "low" and task.payload == old.payload and task.scheduled_at == old.scheduled_at
        assert task.next_at and old.next_at
        expected = old.next_at if old.priority == "low" else old.next_at + timedelta(milliseconds=1)
        assert task.next_at == expected, "a moved entry is news to a consumer that sent the task"
    assert [t.id for t in client.dead_letters("work", collection=batch["collection"])] == []


def test_a_selection_across_lambdas_is_checked_against_the_lambdas_it_selects(client: AtfClient) -> None:
    # Given a collection holding only tasks of `work` (which has `low`; `mail` and others have not)
    collection = f"only-work-{uuid.uuid4().hex[:8]}"
    task = client.schedule("work", collection=collection, delay_seconds=600)
    # When it is moved to `low` with no lambda named, then it moves (it was refused, naming mail's priorities)
    done = client.bulk_reprioritise("low", collection=collection)
    assert (done.changed, client.get(task.id).priority) == (1, "low")
    # And a priority one selected lambda lacks is still refused, before anything changes
    mailed = client.schedule("mail", collection=collection, delay_seconds=600)
    with pytest.raises(UnknownPriority) as refused:
        client.bulk_reprioritise("high", collection=collection)
    assert refused.value.field == "priority" and "mail" in str(refused.value)
    assert (client.get(task.id).priority, client.get(mailed.id).priority) == ("low", "normal")


def test_the_status_filter_finds_retries_waiting_in_the_started_partition(
    client: AtfClient, store: DynamoTaskStore, batch: dict[str, Any]
) -> None:
    retry = _retriable(client, store, batch["collection"])
    only = client.bulk_reschedule(collection=batch["collection"], status=["retriable_failure"], delay_seconds=600)
    assert ([t.id for t in only.matched], only.changed) == ([retry.id], 1)
    moved = client.get(retry.id)
    assert moved.status is S.RETRIABLE_FAILURE and moved.attempt == 1 and moved.next_at != retry.next_at
    news = client.bulk_cancel(collection=batch["collection"], status=["new"], dry_run=True)
    assert [t.id for t in news.matched] == batch["waiting"]


def _retriable(client: AtfClient, store: DynamoTaskStore, collection: str) -> Task:
    """A task whose first attempt failed, waiting a minute to retry."""
    task = advance(store, client.schedule("work", collection=collection).id, S.CLAIMED)
    change = Change(now=datetime.now(UTC), attempt=1, next_at=_at(1))
    outcome = store.transition(TaskRef.of(task), lifecycle.FAIL_RETRIABLE, change)
    assert outcome.applied and outcome.task is not None
    return outcome.task


def _keys_on_every_shard(shards: int) -> list[str]:
    """Fresh flow keys, one whose tasks land on each index shard (a keyed task's shard is its key's)."""
    keys: dict[int, str] = {}
    while len(keys) < shards:
        key = f"cust-{uuid.uuid4().hex[:8]}"
        keys.setdefault(shard_of("", shards, key), key)
    return [keys[shard] for shard in range(shards)]


def test_a_flow_key_selects_only_its_tasks_on_whichever_shard(client: AtfClient) -> None:
    # Given: on each of work's two shards a key with two waiting tasks, and a keyless task beside them
    collection = f"keys-{uuid.uuid4().hex[:8]}"
    keys = _keys_on_every_shard(2)
    owned = {k: [client.schedule("work", collection=collection, flow_key=k, run_at=_at(10 + i)).id for i in (0, 1)]
             for k in keys}  # fmt: skip
    keyless = client.schedule("work", collection=collection, run_at=_at(5)).id
    # When: each key is selected alone (a flow key narrows enough: no `all`)
    for key in keys:
        dry = client.bulk_cancel(flow_key=key, dry_run=True)
        # Then: the dry run lists exactly that key's tasks, with their key
        assert [(t.id, t.flow_key) for t in dry.matched] == [(i, key) for i in owned[key]]
    done = client.bulk_cancel(lambda_name="work", flow_key=keys[0])
    assert (done.changed, done.skipped) == (2, [])
    assert [t.status for t in _states(client, owned[keys[0]])] == [S.CANCELLED] * 2
    assert [t.status for t in _states(client, [*owned[keys[1]], keyless])] == [S.NEW] * 3


def test_a_selection_of_everything_needs_all(client: AtfClient, raw: Raw, item_count: Any) -> None:
    with pytest.raises(InputError) as refused:
        client.bulk_cancel()
    assert refused.value.field == "all"
    with pytest.raises(InputError):
        client.bulk_cancel(status=["new", "enqueued", "retriable_failure"])
    count = item_count()
    reply = raw("POST", "/v1/tasks/bulk/cancel", {})
    assert (reply.status, reply.body["field"]) == (400, "all")
    assert item_count() == count
    assert client.bulk_cancel(all=True, dry_run=True, limit=1).dry_run


@pytest.mark.parametrize(
    ("action", "body", "field"),
    [
        ("cancel", {"lambda": "work", "status": ["bogus"]}, "status[0]"),
        ("cancel", {"lambda": "work", "status": ["success"]}, "status"),
        ("cancel", {"lambda": "work", "since": "2030-01-02T00:00:00Z", "until": "2030-01-01T00:00:00Z"}, "until"),
        ("cancel", {"lambda": "work", "per_second": 0}, "per_second"),
        ("cancel", {"lambda": "nope"}, "lambda"),
        ("cancel", {"flow_key": "a b"}, "flow_key"),
        ("reschedule", {"lambda": "work"}, "run_at"),
        ("reschedule", {"lambda": "work", "run_at": "2030-01-01T00:00:00Z", "delay_seconds": 5}, "delay_seconds"),
        ("reprioritise", {"lambda": "work", "priority": "urgent"}, "priority"),
        ("reprioritise", {"priority": "urgent", "all": True}, "priority"),  # no lambda has it: refused before reading
        ("reprioritise", {"lambda": "work"}, "priority"),
    ],
)
def test_bad_bulk_input_is_refused_naming_the_field(
    raw: Raw, item_count: Any, action: str, body: dict[str, Any], field: str
) -> None:
    count = item_count()
    reply = raw("POST", f"/v1/tasks/bulk/{action}", body)
    assert (reply.status, reply.body["field"]) == (400, field), reply.body
    assert item_count() == count


def test_the_sdk_refuses_bad_bulk_input_before_sending(client: AtfClient) -> None:
    with pytest.raises(InputError) as both:
        client.bulk_reschedule(lambda_name="work", run_at=_at(1), delay_seconds=5)
    assert both.value.field == "delay_seconds"
    with pytest.raises(InputError) as window:
        client.bulk_cancel(lambda_name="work", since=_at(2), until=_at(1))
    assert window.value.field == "until"
    with pytest.raises(InputError) as status:
        client.bulk_cancel(lambda_name="work", status="processing")
    assert status.value.field == "status"
    with pytest.raises(UnknownPriority):
        client.bulk_reprioritise("urgent", lambda_name="work")


# -- one task --------------------------------------------------------------------------


def test_one_waiting_task_changes_its_time_priority_and_payload(client: AtfClient) -> None:
    task = client.schedule("work", {"v": 1}, run_at=_at(10))
    run_at = _at(20)
    changed = client.change(task.id, run_at=run_at, priority="low", payload={"v": 2})
    assert (changed.next_at, changed.scheduled_at, changed.priority, changed.payload) == (
        run_at,
        run_at,
        "low",
        {"v": 2},
    )
    assert changed.status is S.NEW and changed.attempt == 0
    assert client.get(task.id) == changed
    again = client.change(task.id, payload={"v": 3})
    assert (again.next_at, again.priority, again.payload) == (run_at, "low", {"v": 3})


def test_a_claimed_task_refuses_a_change_with_a_conflict(client: AtfClient, store: DynamoTaskStore) -> None:
    task_id = client.schedule("work").id
    advance(store, task_id, S.CLAIMED)
    with pytest.raises(Conflict) as refused:
        client.change(task_id, delay_seconds=60)
    assert refused.value.status == 409 and "claimed" in refused.value.message
    assert client.get(task_id).status is S.CLAIMED


def test_a_claim_between_the_read_and_the_write_refuses_the_change(client: AtfClient, store: DynamoTaskStore) -> None:
    """The fence itself: the change is written for the attempt it read, which a claim has moved on."""
    from atf_core.amend import Amendment, amend

    task = client.get(client.schedule("work").id)
    advance(store, task.id, S.CLAIMED)
    outcome = amend(store, task, Amendment(priority="low"), datetime.now(UTC))
    assert not outcome.applied and outcome.task is not None and outcome.task.status is S.CLAIMED
    assert client.get(task.id).priority == "normal"


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        ({}, "body", "invalid_input"),
        ({"run_at": "2030-01-01T00:00:00Z", "delay_seconds": 1}, "delay_seconds", "invalid_input"),
        ({"priority": "urgent"}, "priority", "unknown_priority"),
        ({"delay_seconds": -1}, "delay_seconds", "invalid_input"),
        ({"payload": [1]}, "payload", "wrong_type"),
        ({"payload": None}, "payload", "invalid_input"),
        ({"priority": None, "delay_seconds": 5}, "priority", "invalid_input"),
        ({"run_at": None, "payload": {"v": 2}}, "run_at", "invalid_input"),
    ],
)
def test_bad_input_to_change_a_task_is_refused_naming_the_field(
    client: AtfClient, raw: Raw, body: dict[str, Any], field: str, code: str
) -> None:
    task = client.schedule("work", {"v": 1}, run_at=_at(10))
    before = client.get(task.id)
    reply = raw("POST", f"/v1/tasks/{task.id}/change", body)
    assert (reply.status, reply.body["field"], reply.body["code"]) == (400, field, code), reply.body
    assert client.get(task.id) == before
    assert before.payload == {"v": 1} and before.next_at == task.run_at


def test_a_change_past_the_tasks_expiry_is_refused_naming_what_the_request_sent(client: AtfClient) -> None:
    task = client.schedule("work", run_at=_at(1), expire_at=_at(5))
    with pytest.raises(InputError) as refused:
        client.change(task.id, run_at=_at(6))
    assert refused.value.field == "run_at"
    with pytest.raises(InputError) as refused:
        client.change(task.id, delay_seconds=6 * 60)
    assert refused.value.field == "delay_seconds" and "expire_at" in refused.value.message
    assert client.get(task.id).next_at == task.run_at


def test_a_change_to_more_than_a_year_back_is_refused(client: AtfClient) -> None:
    task = client.schedule("work", run_at=_at(10))
    for long_ago in (_at(-367 * 24 * 60), datetime(1, 1, 1, tzinfo=UTC)):
        with pytest.raises(InputError) as refused:
            client.change(task.id, run_at=long_ago)
        assert refused.value.field == "run_at" and "more than a year back" in refused.value.message
    assert client.get(task.id).next_at == task.run_at


def test_a_bulk_change_leaves_a_task_it_would_move_past_its_expiry(client: AtfClient) -> None:
    # Given two waiting tasks of a collection, one of them ending at minute 5 if it has not started
    collection, soon, ends, later = f"expiring-{uuid.uuid4().hex[:8]}", _at(1), _at(5), _at(6)
    lasting = client.schedule("work", collection=collection, run_at=soon)
    expiring = client.schedule("work", collection=collection, run_at=soon, expire_at=ends)
    # When the collection is rescheduled to minute 6, as a dry run and then for real
    dry = client.bulk_reschedule(lambda_name="work", collection=collection, run_at=later, dry_run=True)
    done = client.bulk_reschedule(lambda_name="work", collection=collection, run_at=later)
    # Then the expiring task is left as it was, and said to be (a single change refuses that move)
    assert dry.skipped == done.skipped == [expiring.id] and done.changed == 1
    assert client.get(expiring.id).next_at == soon and client.get(lasting.id).next_at == later
    # and when the moved ones run leaves it out: with nothing else to move, no span at all
    ending = client.bulk_reschedule(lambda_name="work", collection=collection, run_at=ends, limit=1)  # the soonest
    assert ending.skipped == [expiring.id] and (ending.first_at, ending.last_at) == (None, None)


def test_an_unknown_task_is_not_found(raw: Raw) -> None:
    reply = raw("POST", f"/v1/tasks/{uuid.uuid4().hex}/change", {"delay_seconds": 5})
    assert reply.status == 404


# -- a message the consumer sent for the old entry --------------------------------------


def _claim(store: DynamoTaskStore, task: Task, priority: str, entry: datetime) -> bool:
    """What a controller does with a message from `priority`'s queue sent for the entry at `entry`."""
    ref = TaskRef(task.id, task.lambda_, priority)
    change = Change(now=datetime.now(UTC), attempt=task.attempt, entry_ms=to_ms(entry))
    return store.transition(ref, lifecycle.CLAIM, change).applied


@pytest.mark.parametrize("recorded", [False, True], ids=["sent", "recorded-as-enqueued"])
def test_a_message_sent_before_a_reschedule_is_refused(
    client: AtfClient, store: DynamoTaskStore, recorded: bool
) -> None:
    sent = client.get(client.schedule("work").id)
    assert sent.next_at is not None
    if recorded:
        advance(store, sent.id, S.ENQUEUED)
    moved = client.change(sent.id, delay_seconds=600)
    assert moved.status is S.NEW and moved.next_at is not None
    assert not _claim(store, sent, "normal", sent.next_at), "the old message does not run it at its old time"
    assert _claim(store, moved, "normal", moved.next_at), "the message for its new entry does"


def test_a_message_from_the_old_priority_is_refused(client: AtfClient, store: DynamoTaskStore) -> None:
    sent = client.get(client.schedule("work", priority="low").id)
    assert sent.next_at is not None
    moved = client.change(sent.id, priority="high")
    assert moved.next_at is not None and moved.next_at > sent.next_at
    assert not _claim(store, sent, "low", sent.next_at)
    assert _claim(store, moved, "high", moved.next_at)


def test_the_claim_checks_the_priority_even_where_the_entry_is_not_later(
    client: AtfClient, store: DynamoTaskStore
) -> None:
    """A message sent ahead for a later entry (T1), then the task moved earlier and to another priority: its
    entry is before T1, so only the priority tells the old message from the new."""
    t1 = _at(30)
    sent = client.get(client.schedule("work", priority="low", run_at=t1).id)
    client.change(sent.id, run_at=_at(10))
    moved = client.change(sent.id, priority="high")
    assert moved.next_at is not None and moved.next_at < t1
    assert not _claim(store, sent, "low", t1)
    assert client.get(sent.id).status is S.NEW


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_the_async_client_changes_tasks_too(stack: Any, store: DynamoTaskStore) -> None:
    from atf_sdk.async_client import AsyncAtfClient

    collection = f"async-{uuid.uuid4().hex[:8]}"
    async with AsyncAtfClient(stack.api_url, region="us-east-1") as atf:
        task = await atf.schedule("work", collection=collection, delay_seconds=600)
        changed = await atf.change(task.id, priority="high")
        assert changed.priority == "high"
        dry = await atf.bulk_reschedule(collection=collection, delay_seconds=60, dry_run=True)
        assert [t.id for t in dry.matched] == [task.id] and dry.changed == 0
        assert (await atf.bulk_cancel(collection=collection)).changed == 1
        advance(store, (await atf.schedule("work", collection=collection)).id, S.CLAIMED)
        claimed = (await atf.bulk_cancel(collection=collection, status=["new"], dry_run=True)).matched
        assert claimed == [], "a claimed task is not selected"


def test_a_real_run_out_of_time_answers_with_what_it_reached_and_more(
    client: AtfClient, store: DynamoTaskStore, stack: Any, batch: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Out of time from the start (reads slower than the budget): each call still writes one task, so
    calling again gets through the selection."""
    from atf_core import bulk

    monkeypatch.setattr(bulk, "RUN_BUDGET_S", 0.0)
    changes = bulk.BulkChanges(store, stack.config)
    selection = bulk.task_filter(collection=batch["collection"])
    for n, task_id in enumerate(batch["waiting"]):
        done = changes.cancel(selection, dry_run=False)
        assert ([t.id for t in done.matched], done.changed, done.more) == ([task_id], 1, n < 2)
        after = [t.status for t in _states(client, batch["waiting"])]
        assert after == [S.CANCELLED] * (n + 1) + [S.NEW] * (2 - n), "nothing it did not list"
    assert changes.cancel(selection, dry_run=False).matched == []


def test_a_bulk_cursor_pages_through_the_selection_and_another_actions_is_refused(
    client: AtfClient, raw: Raw, batch: dict[str, Any]
) -> None:
    # Given three waiting tasks of a collection, and a dry-run cancel of one at a time
    selection = {"collection": batch["collection"], "limit": 1, "dry_run": True}
    first = client.bulk_cancel(**selection)
    assert first.more and first.cursor is not None
    # When the SDK passes each answer's cursor back
    pages = [first]
    while pages[-1].more:
        pages.append(client.bulk_cancel(**selection, cursor=pages[-1].cursor))
    # Then the pages list each task once, in order, and the last has no cursor
    assert [t.id for p in pages for t in p.matched] == batch["waiting"] and pages[-1].cursor is None
    # And the cancel's cursor given to a reschedule is refused by the SDK before sending, naming it
    with pytest.raises(InputError) as refused:
        client.bulk_reschedule(collection=batch["collection"], delay_seconds=60, cursor=first.cursor)
    assert refused.value.field == "cursor" and "cancel" in refused.value.message


@pytest.mark.parametrize("cursor", ["another action's", "mangled", "not base64 JSON", "far too long"])
@pytest.mark.parametrize("path", ["/v1/tasks/bulk/reschedule", "/v1/lambdas/work/tasks/bulk/reschedule"])
def test_a_bad_bulk_cursor_is_refused_naming_it_and_nothing_changes(
    client: AtfClient, raw: Raw, batch: dict[str, Any], path: str, cursor: str
) -> None:
    # Given waiting tasks, and a cursor a reschedule never answered
    given = client.bulk_cancel(collection=batch["collection"], limit=1, dry_run=True).cursor
    assert given is not None
    bad = {"another action's": given, "mangled": given[:-2], "not base64 JSON": "!!", "far too long": "e" * 4000}
    before = _states(client, _all_ids(batch))
    # When the API is asked to reschedule the selection from it
    body = {"collection": batch["collection"], "delay_seconds": 60, "cursor": bad[cursor]}
    reply = raw("POST", path, body)
    # Then it is refused, naming the field, and nothing is written
    assert (reply.status, reply.body["code"], reply.body["field"]) == (400, "invalid_input", "cursor"), reply.body
    assert _states(client, _all_ids(batch)) == before
