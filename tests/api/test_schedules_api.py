"""Periodic schedules through the SDK: put, list, get with next occurrences, pause, resume, delete on
the quiet stack (nothing fires there); on the live one, a schedule every second creates tasks that run."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from atf_core.aws import make_clients
from atf_core.definitions import Attr
from atf_core.errors import NotFound, UnknownLambda, UnknownPriority
from atf_core.periodic_schedules import Schedules
from atf_core.recurrence import ScheduleSpec
from atf_core.schema import TaskStatus, to_ms
from atf_core.store.items import SPEC_FIELD, ItemStore, schedule_from, schedule_id
from atf_core.tasks import task_id_for
from atf_core.vocabulary import CatchUp, Overlap
from atf_local.stack import LocalStack
from atf_sdk.client import AtfClient
from tests.api.live import LiveStack

WEEKDAYS = {"lambda": "chore", "cron": "30 9 * * 1-5", "timezone": "Europe/Paris", "payload": {"report": "daily"}}


def name() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


def test_put_then_get_with_the_next_occurrences(client: AtfClient) -> None:
    schedule = client.put_schedule(sched := name(), WEEKDAYS)
    assert (schedule.name, schedule.spec.cron, schedule.paused, schedule.fired) == (sched, "30 9 * * 1-5", False, 0)
    assert (schedule.spec.overlap, schedule.spec.catch_up) == (Overlap.SKIP, CatchUp.ONCE), "the defaults"
    view = client.get_schedule(sched, upcoming=3)
    assert view.next_occurrence == view.upcoming[0] and len(view.upcoming) == 3
    paris = [moment.astimezone(ZoneInfo("Europe/Paris")) for moment in view.upcoming]
    assert all((m.hour, m.minute) == (9, 30) and m.weekday() < 5 for m in paris)
    assert client.get_schedule(sched, upcoming=0).upcoming == []


def test_a_cron_shortcut_is_stored_as_its_fields(client: AtfClient) -> None:
    # It had answered 502: croniter took it, and the consumer's stepping did not
    schedule = client.put_schedule(sched := name(), {"lambda": "chore", "cron": "@daily", "timezone": "Europe/Paris"})
    assert schedule.spec.cron == "0 0 * * *"
    paris = [m.astimezone(ZoneInfo("Europe/Paris")) for m in client.get_schedule(sched, upcoming=2).upcoming]
    assert [(m.hour, m.minute) for m in paris] == [(0, 0), (0, 0)] and paris[1] - paris[0] == timedelta(days=1)


def test_a_fixed_rate_counts_from_when_it_was_put(client: AtfClient) -> None:
    schedule = client.put_schedule(sched := name(), {"lambda": "chore", "every_seconds": 90})
    upcoming = client.get_schedule(sched, upcoming=2).upcoming
    assert upcoming == [schedule.created_at + timedelta(seconds=90 * k) for k in (1, 2)]


def test_replacing_keeps_the_pause_and_the_counts(client: AtfClient) -> None:
    client.put_schedule(sched := name(), WEEKDAYS)
    client.pause_schedule(sched)
    replaced = client.put_schedule(sched, {**WEEKDAYS, "cron": "0 18 * * 5", "collection": "evening"})
    assert replaced.paused and replaced.spec.cron == "0 18 * * 5" and replaced.spec.collection == "evening"
    assert client.get_schedule(sched).spec.collection == "evening"


def test_pause_resume_list_and_delete(client: AtfClient) -> None:
    client.put_schedule(first := name(), WEEKDAYS)
    client.put_schedule(second := name(), {"lambda": "mail", "every_seconds": 3600})
    paused = client.pause_schedule(first)
    assert paused.paused and client.get_schedule(first).upcoming == [], "a paused schedule has no next occurrences"
    assert not client.resume_schedule(first).paused and len(client.get_schedule(first).upcoming) == 5
    chores = {s.name for s in client.schedules("chore")}
    assert first in chores and second not in chores and second in {s.name for s in client.schedules()}
    client.delete_schedule(first)
    with pytest.raises(NotFound):
        client.get_schedule(first)
    with pytest.raises(NotFound):
        client.delete_schedule(first)
    with pytest.raises(NotFound):
        client.pause_schedule(first)


def test_a_pause_is_not_lost_to_a_consumer_firing_the_schedule_meanwhile(
    stack: LocalStack, store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    schedules = Schedules(
        store, ItemStore(make_clients(stack.endpoint).dynamodb, stack.config.table_name), stack.config
    )
    schedules.put(sched := name(), ScheduleSpec.model_validate({"lambda": "chore", "every_seconds": 60}))
    read = schedules._read

    def read_then_fire(schedule_name: str) -> dict[str, Any] | None:
        raw = read(schedule_name)
        found = schedule_from(raw) if raw else None
        if found is not None and found.fired == 0:  # a consumer saves its firing right after this read
            assert schedules._save(found.model_copy(update={"fired": 1}), found.version)
        return raw

    monkeypatch.setattr(schedules, "_read", read_then_fire)
    schedules.set_paused(sched, True)
    stored = schedules.get(sched)
    assert stored.paused and stored.fired == 1, "both writes landed"


def test_stats_show_the_lambdas_schedules(client: AtfClient) -> None:
    client.put_schedule(sched := name(), {"lambda": "chore", "every_seconds": 120, "collection": "bulk"})
    client.pause_schedule(sched)
    brief = {s.name: s for s in client.stats("chore").schedules}[sched]
    assert (brief.every_seconds, brief.cron, brief.collection, brief.paused) == (120, None, "bulk", True)
    assert sched not in {s.name for s in client.stats("mail").schedules}


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"lambda": "chore", "cron": "every day"}, "cron"),
        ({"lambda": "chore", "cron": "0 0 30 2 *"}, "cron"),  # 30 February never comes
        ({"lambda": "chore", "cron": "0 0 1 1 * 0 2031"}, "cron"),  # a year field runs out
        ({"lambda": "chore"}, "cron"),
        ({"lambda": "chore", "cron": "* * * * *", "every_seconds": 5}, "every_seconds"),
        ({"lambda": "chore", "every_seconds": 0.5}, "every_seconds"),
        ({"lambda": "chore", "every_seconds": 5, "timezone": "Mars/Olympus"}, "timezone"),
        ({"lambda": "chore", "every_seconds": 5, "timezone": "Europe/Paris"}, "timezone"),
        ({"lambda": "chore", "every_seconds": 5, "overlap": "queue"}, "overlap"),
        ({"lambda": "chore", "every_seconds": 5, "catch_up_limit": 0}, "catch_up_limit"),
        ({"lambda": "chore", "every_seconds": 5, "when": "now"}, "when"),
        ({"lambda": "chore", "every_seconds": 5, "flow_key": ""}, "flow_key"),
    ],
)
def test_bad_schedules_are_400s_and_write_nothing(raw: Any, item_count: Any, spec: dict[str, Any], field: str) -> None:
    before = item_count()
    reply = raw("PUT", f"/v1/schedules/{name()}", spec)
    assert (reply.status, reply.body["field"]) == (400, field), reply.body
    assert item_count() == before


def test_unknown_lambdas_and_priorities_are_refused(client: AtfClient, item_count: Any) -> None:
    before = item_count()
    with pytest.raises(UnknownLambda):
        client.put_schedule(name(), {"lambda": "nope", "every_seconds": 5})
    with pytest.raises(UnknownPriority):
        client.put_schedule(name(), {"lambda": "chore", "every_seconds": 5, "priority": "low"})
    assert item_count() == before


def test_a_schedule_every_second_creates_tasks_that_run(live: LiveStack) -> None:
    client, sched = live.client, name()
    spec = {"lambda": "tick", "every_seconds": 1, "overlap": "allow", "catch_up": "all", "payload": {"from": sched}}
    created = client.put_schedule(sched, spec).created_at
    try:
        live.wait_for(lambda: client.get_schedule(sched), lambda s: s.fired >= 2)
    finally:
        client.delete_schedule(sched)
    # each occurrence's task has an id derived from the schedule and the occurrence: no duplicates
    occurrences = [created + timedelta(seconds=k) for k in (1, 2)]
    ids = [task_id_for("tick", f"periodic/{sched}/{to_ms(moment)}") for moment in occurrences]
    tasks = [live.wait_for(lambda i=i: client.get(i), lambda t: t.status is TaskStatus.SUCCESS) for i in ids]
    assert [t.scheduled_at for t in tasks] == occurrences and {t.payload["from"] for t in tasks} == {sched}


def test_a_schedule_stored_with_a_collection_refused_since_is_still_shown_by_the_sdk(
    stack: LocalStack, client: AtfClient
) -> None:
    # Given a schedule whose stored spec has the collection "." (refused as input since)
    client.put_schedule(sched := name(), {"lambda": "chore", "every_seconds": 60, "collection": "c"})
    stored = json.dumps({"lambda": "chore", "every_seconds": 60, "collection": "."})
    make_clients(stack.endpoint).dynamodb.update_item(
        TableName=stack.config.table_name,
        Key={Attr.ID: {"S": schedule_id(sched)}},
        UpdateExpression="SET #f = :t",
        ExpressionAttributeNames={"#f": SPEC_FIELD},
        ExpressionAttributeValues={":t": {"S": stored}},
    )
    # Then the SDK reads the answers about it as stored, and the listing of every schedule too
    assert client.get_schedule(sched).spec.collection == "."
    assert sched in [s.name for s in client.schedules()]
    client.delete_schedule(sched)
