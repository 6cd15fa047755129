"""Dead letters, periodic schedules, chains, limits, expiry and fair share, in the core
(moto in-process, a controlled clock)."""

from __future__ import annotations

import itertools
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from botocore.exceptions import ClientError
from pydantic import ValidationError

from atf_core import lifecycle
from atf_core.amend import Amendment, amend
from atf_core.chains import Chains, ChainSpec, ChainStatus, SweepFailed
from atf_core.config import LambdaSpec, Limits, StackConfig
from atf_core.consumer import Consumer, Event
from atf_core.consumer.consumer import fair_share
from atf_core.deadletters import DeadLetterFilter, DeadLetters, letter_position, position_of, position_text
from atf_core.definitions import Attr
from atf_core.errors import Conflict, InputError
from atf_core.lifecycle import Assoc
from atf_core.limits import Grant, Limiter, Refusal
from atf_core.periodic_schedules import Schedules
from atf_core.recurrence import ScheduleSpec
from atf_core.schema import MAX_JSON_DEPTH, TaskError, TaskStatus, to_ms, utcnow
from atf_core.store.base import Change, DueEntry, TaskRef, TaskStore
from atf_core.store.codec import index_partition, shard_of
from atf_core.store.counters import Counters
from atf_core.store.items import CHAINS_PARTITION, SPEC_FIELD, ItemStore, schedule_id
from atf_core.tasks import Scheduling
from atf_core.vocabulary import CatchUp, Overlap
from tests.functional.test_consumer import World

T = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def world(aws: Any, config: StackConfig) -> World:
    lambdas = dict(config.lambdas)
    lambdas["sleepy"] = LambdaSpec(priorities=["normal"], default_priority="normal", max_attempts=2)  # dead letters on
    world = World(aws, config.model_copy(update={"lambdas": lambdas}))
    world.items = ItemStore(aws.dynamodb, config.table_name)  # type: ignore[attr-defined]
    world.dynamodb = aws.dynamodb  # type: ignore[attr-defined]
    world.counters = Counters(aws.dynamodb, config.table_name)  # type: ignore[attr-defined]
    world.now = T
    return world


def run_once(world: World, task_id: str, lambda_name: str, outcome: str, error_type: str = "ValueError") -> None:
    """Drive one execution: enqueue, claim, then report success or a fatal failure."""
    world.consumer.poll()
    world.drain(lambda_name=lambda_name)
    task = world.store.get(task_id)
    assert task is not None
    ref = TaskRef.of(task)
    claimed = world.store.transition(ref, lifecycle.CLAIM, Change(now=world.now, attempt=task.attempt))
    assert claimed.applied, f"{task.status} {claimed.task.status if claimed.task else None}"
    if outcome == "succeed":
        assert world.store.transition(ref, lifecycle.SUCCEED, Change(now=world.now, attempt=task.attempt + 1)).applied
        return
    error = TaskError(type=error_type, message="broken", attempt=task.attempt + 1, at=world.now, host="h:1")
    change = Change(now=world.now, attempt=task.attempt + 1, next_at=world.now, error=error)
    assert world.store.transition(ref, lifecycle.FAIL_TO_DEAD_LETTER, change).applied


# -- dead letters ---------------------------------------------------------------
def test_dead_letters_are_listed_by_filter_and_redriven_with_a_fresh_budget(world: World) -> None:
    dead = [world.schedule(**{"lambda": "sleepy", "collection": c}) for c in ("a", "a", "b")]
    for task, kind in zip(dead, ["KeyError", "ValueError", "ValueError"], strict=True):
        run_once(world, task.id, "sleepy", "fail", kind)
    letters = DeadLetters(world.store, world.config)
    assert len(letters.matching(DeadLetterFilter("sleepy"))) == 3
    assert {d.id for d in letters.matching(DeadLetterFilter("sleepy", collection="a"))} == {dead[0].id, dead[1].id}
    assert [d.id for d in letters.matching(DeadLetterFilter("sleepy", error_type="KeyError"))] == [dead[0].id]
    window = letters.matching(DeadLetterFilter("sleepy", since=T + timedelta(seconds=1)))
    assert window == []
    # a dry run says how many and which, and changes nothing
    dry = letters.redrive(DeadLetterFilter("sleepy", error_type="ValueError"), dry_run=True, per_second=1)
    assert {d.id for d in dry.matched} == {dead[1].id, dead[2].id} and dry.changed == 0
    assert world.status(dead[1]) is TaskStatus.DEAD_LETTER
    # the real one sends them back to new, dripped one a second, with a fresh budget
    called_at = utcnow()
    done = letters.redrive(DeadLetterFilter("sleepy", error_type="ValueError"), dry_run=False, per_second=1)
    assert done.changed == 2 and done.last_at is not None and done.first_at is not None
    # its first_at is the time of the call, the drip's start
    assert called_at <= done.first_at <= utcnow()
    assert (done.last_at - done.first_at).total_seconds() == pytest.approx(1.0)
    again = world.store.get(dead[1].id)
    assert again is not None and again.status is TaskStatus.NEW
    assert again.max_attempts == again.attempt + 2 and [e.type for e in again.errors] == ["ValueError"]
    assert again.errors[0].host == "h:1"


def test_dead_letters_that_died_in_the_same_millisecond_are_paged_each_once(world: World) -> None:
    # Given seven dead letters that all died at the same moment, across the lambda's shards
    dead = {world.schedule(**{"lambda": "sleepy"}).id for _ in range(7)}
    for task_id in dead:
        run_once(world, task_id, "sleepy", "fail")
    letters, selection = DeadLetters(world.store, world.config), DeadLetterFilter("sleepy", limit=3)
    # When they are listed three at a time, each page from where the last one ended
    pages, after = [letters.page(selection)], None
    while pages[-1].more:
        after = letter_position(pages[-1].letters[-1])
        pages.append(letters.page(selection, after))
    # Then each is listed once, in the order of (time of death, id), and only the last page says it is the last
    listed = [d.id for page in pages for d in page.letters]
    assert [len(page.letters) for page in pages] == [3, 3, 1] and listed == sorted(dead)
    # And a redrive or a discard of fewer than all says more are left
    assert letters.redrive(selection, dry_run=True).more and letters.discard(selection, dry_run=True).more
    assert not letters.discard(DeadLetterFilter("sleepy", limit=7), dry_run=True).more


def test_a_redrive_that_reached_part_of_its_selection_bounds_the_rest_by_its_time(world: World) -> None:
    # Given three dead letters, and a redrive of the oldest two a minute later (at a moment between two ms)
    dead = [world.schedule(**{"lambda": "sleepy"}).id for _ in range(3)]
    for task_id in dead:
        run_once(world, task_id, "sleepy", "fail")
    oldest, _, last = sorted(dead)
    called = T + timedelta(minutes=1, microseconds=500)
    letters = DeadLetters(world.store, world.config, clock=lambda: called)
    # (A selection whose own until is earlier than the call keeps it, a dry run's and a discard's alike)
    earlier = T + timedelta(seconds=1)
    assert letters.redrive(DeadLetterFilter("sleepy", until=earlier, limit=1), dry_run=True).until == earlier
    assert letters.discard(DeadLetterFilter("sleepy", limit=1), dry_run=True).until == T + timedelta(minutes=1)
    done = letters.redrive(DeadLetterFilter("sleepy", limit=2), dry_run=False)
    # Then it says more are dead, where it ended, and the until of the rest: the call's time, to the millisecond
    assert done.changed == 2 and done.more and done.next == position_text(done.matched[-1])
    assert done.until == T + timedelta(minutes=1)
    # When one it redrove dies again, and the redrive goes on past its next, through its until
    world.now = T + timedelta(minutes=2)
    run_once(world, oldest, "sleepy", "fail")
    rest = DeadLetterFilter("sleepy", limit=2, until=done.until)
    went_on = letters.redrive(rest, dry_run=False, after=position_of(done.next))
    # Then it takes the third alone, not the one that died again, and says the selection has ended
    assert [d.id for d in went_on.matched] == [last] and not went_on.more and went_on.until is None
    assert world.store.get_many([oldest])[0].status is TaskStatus.DEAD_LETTER


def test_a_redrive_dripped_over_more_than_a_year_is_refused_leaving_the_letters_dead(world: World) -> None:
    dead = [world.schedule(**{"lambda": "sleepy"}) for _ in range(2)]
    for task in dead:
        run_once(world, task.id, "sleepy", "fail")
    letters = DeadLetters(world.store, world.config)
    for dry_run, per_second in itertools.product((True, False), (3e-8, 1e-300)):  # 1e-300: past datetime's range
        with pytest.raises(InputError) as refused:
            letters.redrive(DeadLetterFilter("sleepy"), dry_run=dry_run, per_second=per_second)
        assert refused.value.field == "per_second"
    assert [world.status(task) for task in dead] == [TaskStatus.DEAD_LETTER] * 2


def test_discarding_dead_letters_ends_them(world: World) -> None:
    task = world.schedule(**{"lambda": "sleepy"})
    run_once(world, task.id, "sleepy", "fail")
    result = DeadLetters(world.store, world.config).discard(DeadLetterFilter("sleepy"), dry_run=False)
    assert result.changed == 1 and world.status(task) is TaskStatus.FATAL_FAILURE


# -- periodic -----------------------------------------------------------------
def schedules(world: World) -> Schedules:
    return Schedules(world.store, world.items, world.config)  # type: ignore[attr-defined]


def test_a_fixed_rate_schedule_makes_one_task_per_occurrence_even_with_two_consumers(world: World) -> None:
    spec = ScheduleSpec.model_validate({"lambda": "work", "every_seconds": 10, "overlap": "allow"})
    schedules(world).put("tick", spec, now=T)
    for _ in range(3):
        world.now += timedelta(seconds=10)
        first, second = schedules(world).fire_due(world.now), schedules(world).fire_due(world.now)
        assert first.created + second.created == 1
    stored = schedules(world).get("tick")
    assert stored.fired == 3 and stored.next_occurrence == T + timedelta(seconds=40)


def test_catch_up_policies_after_downtime(world: World) -> None:
    for name, policy in (("skip", CatchUp.SKIP), ("once", CatchUp.ONCE), ("all", CatchUp.ALL)):
        spec = ScheduleSpec.model_validate(
            {"lambda": "work", "cron": "* * * * *", "catch_up": policy, "catch_up_limit": 3, "overlap": "allow"}
        )
        schedules(world).put(name, spec, now=T)
    world.now = T + timedelta(minutes=5, seconds=30)  # five occurrences missed, the last 30 s ago
    schedules(world).fire_due(world.now)
    fired = {name: schedules(world).get(name).fired for name in ("skip", "once", "all")}
    assert fired == {"skip": 1, "once": 1, "all": 3}
    world.now = T + timedelta(minutes=8, seconds=5)
    schedules(world).fire_due(world.now)
    assert schedules(world).get("skip").fired == 2  # 12:06 and 12:07 were missed; 12:08 is 5 s late, not missed
    assert schedules(world).get("once").fired == 2


def test_a_frequent_schedule_back_from_a_long_pause_runs_once_for_its_latest_occurrence(world: World) -> None:
    # Given every 5 s, paused for three days (more occurrences than the gap's count walks)
    spec = ScheduleSpec.model_validate({"lambda": "work", "every_seconds": 5, "overlap": "allow"})
    schedules(world).put("often", spec, now=T)
    schedules(world).set_paused("often", True, now=T)
    world.now = T + timedelta(days=3, seconds=2)
    schedules(world).set_paused("often", False, now=world.now)
    # When it next fires, and the consumer's following polls find it again
    world.now += timedelta(seconds=3)
    first = schedules(world).fire_due(world.now)
    again = schedules(world).fire_due(world.now + timedelta(seconds=1))
    # Then one task ran, for the latest occurrence, and every other one is counted as skipped
    stored = schedules(world).get("often")
    task = world.store.get(stored.last_task_id or "")
    assert (first.created, again.created) == (1, 0)
    assert task is not None and task.scheduled_at == T + timedelta(days=3, seconds=5)
    assert stored.last_occurrence == task.scheduled_at and stored.skipped == (3 * 86400 + 5) // 5 - 1


def test_overlap_skip_waits_for_the_previous_occurrence(world: World) -> None:
    spec = ScheduleSpec(lambda_="work", every_seconds=10, overlap=Overlap.SKIP)
    schedules(world).put("slow", spec, now=T)
    world.now = T + timedelta(seconds=10)
    assert schedules(world).fire_due(world.now).created == 1
    world.now += timedelta(seconds=10)
    report = schedules(world).fire_due(world.now)
    assert (report.created, report.skipped) == (0, 1)


def test_catch_up_all_runs_its_occurrences_with_overlap_skip_unless_an_earlier_task_still_runs(world: World) -> None:
    # Given a schedule every minute that catches up to 3 occurrences, with the default overlap (skip)
    spec = ScheduleSpec.model_validate({"lambda": "work", "cron": "* * * * *", "catch_up": "all", "catch_up_limit": 3})
    schedules(world).put("all", spec, now=T)
    # When five occurrences were missed, then each of the latest three runs (they do not overlap each other)
    world.now = T + timedelta(minutes=5, seconds=30)
    report = schedules(world).fire_due(world.now)
    assert (report.created, report.skipped) == (3, 2)
    # And when three more are missed while those tasks have not finished, then all three are skipped
    world.now += timedelta(minutes=3)
    report = schedules(world).fire_due(world.now)
    assert (report.created, report.skipped) == (0, 3)
    assert schedules(world).get("all").fired == 3


def every_minute(**fields: Any) -> ScheduleSpec:
    return ScheduleSpec.model_validate({"lambda": "work", "cron": "* * * * *", "overlap": "allow", **fields})


def test_a_replaced_schedule_makes_no_task_for_occurrences_before_it_was_replaced(world: World) -> None:
    # Given an hourly schedule that fired at 12:00, replaced at 12:30 by one every five minutes catching up all
    schedules(world).put("job", every_minute(cron="0 * * * *"), now=T - timedelta(minutes=1))
    assert schedules(world).fire_due(T).created == 1
    schedules(world).put("job", every_minute(cron="*/5 * * * *", catch_up="all"), now=T + timedelta(minutes=30))
    # When it fires at 12:35
    report = schedules(world).fire_due(T + timedelta(minutes=35))
    # Then only 12:35 runs: 12:05 to 12:30 were occurrences of a spec it did not have then
    assert (report.created, report.skipped) == (1, 0)
    assert world.store.get(schedules(world).get("job").last_task_id or "").scheduled_at == T + timedelta(minutes=35)  # type: ignore[union-attr]


def test_a_schedule_paused_after_the_index_listed_it_does_not_fire(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a schedule paused a second before its occurrence, which the index still lists (it lags, or the
    # consumer's query ran just before the pause)
    schedules(world).put("job", every_minute(), now=T)
    schedules(world).set_paused("job", True, now=T + timedelta(seconds=59))
    monkeypatch.setattr(world.items, "partition", lambda *_: iter([schedule_id("job")]))  # type: ignore[attr-defined]
    # When the consumer fires what the index listed, then nothing of it runs, and it stays paused
    assert schedules(world).fire_due(T + timedelta(minutes=1)).created == 0
    stored = schedules(world).get("job")
    assert stored.paused and stored.fired == 0 and stored.last_task_id is None


def test_a_schedule_whose_firing_fails_holds_up_no_other_and_fires_at_the_next_poll(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two schedules due at the same minute, and a store throttling the first task made
    firing = schedules(world)
    firing.put("a", every_minute(), now=T)
    firing.put("b", every_minute(), now=T)
    create, calls = firing._create, []

    def first_throttled(*args: Any) -> str:
        calls.append(args)
        if len(calls) == 1:
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "PutItem")
        return create(*args)

    monkeypatch.setattr(firing, "_create", first_throttled)
    # When the consumer fires them, then the other schedule still fires, and the failure is raised after
    with pytest.raises(ClientError):
        firing.fire_due(T + timedelta(minutes=1))
    assert [firing.get(name).fired for name in ("a", "b")].count(1) == 1
    # And the one that failed fires its occurrence at the next poll
    assert firing.fire_due(T + timedelta(minutes=1, seconds=1)).created == 1
    assert firing.get("a").fired == firing.get("b").fired == 1


def test_an_occurrence_in_the_hand_over_is_made_and_sent_by_the_invocations_last_poll(world: World) -> None:
    # Given a schedule due at the minute, and a consumer that fires schedules
    schedules(world).put("job", every_minute(), now=T)
    consumer = Consumer(world.store, world.sqs, world.config, clock=lambda: world.now,
                        housekeeping=[schedules(world).fire_due])  # fmt: skip
    # When an invocation's last poll, 3 s before the minute, reads past it to the next invocation's first poll
    world.now = T + timedelta(minutes=1, seconds=-3)
    report = consumer.poll(handover_s=3)
    # Then the occurrence's task is made and sent in that poll (not left for the next invocation)
    assert report.total(Event.ENQUEUED) == 1
    [message] = world.drain()
    assert message.task_id == schedules(world).get("job").last_task_id


def test_an_occurrence_a_deleted_schedule_made_ahead_does_not_hold_up_its_successor(world: World) -> None:
    # Given a schedule that made 12:00's task ahead, then deleted and made again with another payload before 12:00
    schedules(world).put("job", every_minute(catch_up="all", payload={"v": "A"}), now=T - timedelta(seconds=30))
    assert schedules(world).fire_due(T - timedelta(milliseconds=500), lookahead_s=1).created == 1
    schedules(world).delete("job")
    schedules(world).put("job", every_minute(catch_up="all", payload={"v": "B"}), now=T - timedelta(milliseconds=400))
    # When it fires 12:00 (which has its predecessor's task), then 12:01
    at_noon = schedules(world).fire_due(T + timedelta(milliseconds=100), lookahead_s=1)
    a_minute_on = schedules(world).fire_due(T + timedelta(minutes=1, milliseconds=100), lookahead_s=1)
    # Then 12:00 is skipped (its task is the one made before), and 12:01 runs at its time with the new payload
    assert (at_noon.created, at_noon.skipped, a_minute_on.created, a_minute_on.skipped) == (0, 1, 1, 0)
    task = world.store.get(schedules(world).get("job").last_task_id or "")
    assert task is not None and task.scheduled_at == T + timedelta(minutes=1) and task.payload == {"v": "B"}


def test_schedules_pause_resume_list_and_show_next_occurrences(world: World) -> None:
    spec = ScheduleSpec.model_validate({"lambda": "work", "cron": "0 9 * * 1-5", "timezone": "Europe/Paris"})
    schedules(world).put("weekday", spec, now=T)
    assert [s.name for s in schedules(world).all()] == ["weekday"]
    upcoming = schedules(world).upcoming("weekday", 3)
    assert all(moment.astimezone().weekday() < 5 for moment in upcoming) and len(upcoming) == 3
    paused = schedules(world).set_paused("weekday", True)
    # Paused, it has no next occurrence: as the pause returns it, as read, and once put again (it stays paused)
    assert paused.next_occurrence is None and schedules(world).get("weekday").next_occurrence is None
    assert schedules(world).upcoming("weekday", 3) == []
    assert schedules(world).put("weekday", spec, now=T).next_occurrence is None
    world.now = T + timedelta(days=7)
    assert schedules(world).fire_due(world.now).created == 0
    resumed = schedules(world).set_paused("weekday", False)
    assert resumed.next_occurrence is not None and resumed.next_occurrence.astimezone().weekday() < 5
    schedules(world).delete("weekday")
    assert schedules(world).all() == []


def test_bad_schedules_are_refused() -> None:
    with pytest.raises(ValueError, match="cron"):
        ScheduleSpec.model_validate({"lambda": "work", "cron": "every day"})
    with pytest.raises(ValueError, match="exactly one"):
        ScheduleSpec.model_validate({"lambda": "work"})
    with pytest.raises(ValueError, match="time zone"):
        ScheduleSpec.model_validate({"lambda": "work", "every_seconds": 5, "timezone": "Mars/Olympus"})


# -- chains -------------------------------------------------------------------
def chain_spec() -> ChainSpec:
    return ChainSpec.model_validate(
        {
            "links": [
                {"name": "fetch", "lambda": "work"},
                {"name": "resize", "lambda": "work", "after": ["fetch"]},
                {"name": "notify", "lambda": "sleepy", "after": ["fetch"]},
                {"name": "report", "lambda": "work", "after": ["resize", "notify"]},
            ],
            "key": "album-42",
        }
    )


def chains(world: World) -> Chains:
    return Chains(world.store, world.items, world.config)  # type: ignore[attr-defined]


def test_a_chain_runs_each_link_after_its_parents_and_a_failed_link_can_be_retried(world: World) -> None:
    view = chains(world).create(chain_spec(), now=world.now)
    ids = {link.name: link.task_id for link in view.links}
    assert [link.status for link in view.links] == [TaskStatus.NEW] + [TaskStatus.WAITING] * 3
    assert chains(world).create(chain_spec()).id == view.id  # the same key: the same chain
    run_once(world, ids["fetch"], "work", "succeed")
    assert chains(world).advance(view.id) == 2
    run_once(world, ids["resize"], "work", "succeed")
    run_once(world, ids["notify"], "sleepy", "fail")
    chains(world).advance(view.id)
    failed = chains(world).get(view.id)
    assert failed.status is ChainStatus.FAILED
    assert {lk.name: lk.status for lk in failed.links}["report"] is TaskStatus.WAITING
    chains(world).retry(view.id, "notify")
    run_once(world, ids["notify"], "sleepy", "succeed")
    world.advance(10)
    assert chains(world).sweep(world.now) == 1  # the consumer's safety net releases "report"
    run_once(world, ids["report"], "work", "succeed")
    assert chains(world).get(view.id).status is ChainStatus.SUCCEEDED


def test_cancelling_a_chain_cancels_the_links_not_started(world: World) -> None:
    view = chains(world).create(chain_spec())
    cancelled = chains(world).cancel(view.id)
    assert {link.status for link in cancelled.links} == {TaskStatus.CANCELLED}
    assert cancelled.status is ChainStatus.CANCELLED


def fork() -> ChainSpec:
    """a, then b and c after it, then d after b."""
    links = [{"name": "a", "lambda": "work"}, {"name": "b", "lambda": "work", "after": ["a"]}]
    links += [{"name": "c", "lambda": "sleepy", "after": ["a"]}, {"name": "d", "lambda": "work", "after": ["b"]}]
    return ChainSpec.model_validate({"links": links, "key": f"fork-{uuid.uuid4().hex}"})


def test_the_sweep_still_releases_a_branch_of_a_chain_another_branch_failed(world: World) -> None:
    # Given a chain whose a succeeded and whose c then failed for good, while b waits to run
    view = chains(world).create(fork(), now=world.now)
    ids = {link.name: link.task_id for link in view.links}
    run_once(world, ids["a"], "work", "succeed")
    chains(world).advance(view.id)
    run_once(world, ids["c"], "sleepy", "fail")
    world.advance(10)
    chains(world).sweep(world.now)
    assert chains(world).get(view.id).status is ChainStatus.FAILED
    # When b succeeds and its executor dies before releasing d
    run_once(world, ids["b"], "work", "succeed")
    # Then the consumer's sweep still releases d (the failed chain had left the sweep: d waited for ever)
    world.advance(10)
    assert chains(world).sweep(world.now) == 1
    run_once(world, ids["d"], "work", "succeed")
    world.advance(10)
    chains(world).sweep(world.now)
    swept = world.items.partition(CHAINS_PARTITION, to_ms(world.now + timedelta(minutes=1)))  # type: ignore[attr-defined]
    assert f"#chain#{view.id}" not in list(swept), "nothing of it can move now: it left the sweep"


def test_a_link_redriven_from_the_dead_letters_puts_its_failed_chain_back_in_the_sweep(world: World) -> None:
    # Given a chain whose notify failed for good after fetch and resize succeeded: report waits on notify, the
    # chain failed, and nothing of it can move, so it left the sweep
    view = chains(world).create(chain_spec().model_copy(update={"key": None}), now=world.now)
    ids = {link.name: link.task_id for link in view.links}
    run_once(world, ids["fetch"], "work", "succeed")
    chains(world).advance(view.id)
    run_once(world, ids["resize"], "work", "succeed")
    run_once(world, ids["notify"], "sleepy", "fail")
    world.advance(10)
    assert chains(world).sweep(world.now) == 0 and chains(world).get(view.id).status is ChainStatus.FAILED
    swept = world.items.partition(CHAINS_PARTITION, to_ms(world.now + timedelta(minutes=1)))  # type: ignore[attr-defined]
    assert f"#chain#{view.id}" not in list(swept)
    # When an operator redrives notify from the dead letters (not through the chain), and it succeeds on a host
    # that dies before releasing report
    letters = DeadLetters(world.store, world.config, rejoin_chain=chains(world).rejoin)
    assert letters.redrive(DeadLetterFilter("sleepy"), dry_run=False).changed == 1
    run_once(world, ids["notify"], "sleepy", "succeed")
    world.advance(10)
    # Then the consumer's sweep releases report, and the chain runs to its end
    assert chains(world).sweep(world.now) == 1
    run_once(world, ids["report"], "work", "succeed")
    assert chains(world).get(view.id).status is ChainStatus.SUCCEEDED


def index_key(world: World, task_id: str) -> str:
    item = world.dynamodb.get_item(TableName=world.config.table_name, Key={Attr.ID: {"S": task_id}})  # type: ignore[attr-defined]
    return str(item["Item"][Attr.INDEX_PK]["S"])


def test_a_release_addresses_the_link_as_stored_under_the_configuration_it_was_made_with(world: World) -> None:
    # Given a chain whose second link has a flow key whose shard is not its task id's, made while work's default
    # priority was normal
    links = [{"name": "a", "lambda": "work"}, {"name": "b", "lambda": "work", "after": ["a"], "flow_key": "k-7"}]
    shards = world.config.shards_of("work")
    while True:  # a chain's id is drawn at random: half of them would tell nothing
        view = chains(world).create(ChainSpec.model_validate({"links": links}), now=world.now)
        ids = {link.name: link.task_id for link in view.links}
        if shard_of(ids["b"], shards) != shard_of(ids["b"], shards, "k-7"):
            break
    run_once(world, ids["a"], "work", "succeed")
    # When the stack is redeployed with low as work's default, and a's executor releases b under it
    work = world.config.lambdas["work"].model_copy(update={"default_priority": "low"})
    redeployed = world.config.model_copy(update={"lambdas": {**world.config.lambdas, "work": work}})
    assert Chains(world.store, world.items, redeployed).advance(view.id) == 1  # type: ignore[attr-defined]
    # Then b is released at the priority it was made with, into its flow key's shard, as any keyed task
    released = world.store.get(ids["b"])
    assert released is not None and (released.status, released.priority) == (TaskStatus.NEW, "normal")
    shard = shard_of(ids["b"], shards, "k-7")
    assert index_key(world, ids["b"]) == index_partition(Assoc.NEW, "work", "normal", shard)


def test_a_cancelled_link_makes_the_chain_cancelled_only_once_no_other_can_run(world: World) -> None:
    # Given a chain whose a succeeded, b and c released
    view = chains(world).create(fork(), now=world.now)
    ids = {link.name: link.task_id for link in view.links}
    run_once(world, ids["a"], "work", "succeed")
    chains(world).advance(view.id)
    # When b alone is cancelled, then the chain runs on while c has yet to run (it had shown cancelled, then running)
    assert Scheduling(world.store, world.config).cancel(ids["b"]).status is TaskStatus.CANCELLED
    assert chains(world).get(view.id).status is ChainStatus.RUNNING
    # And once c has run, nothing else can: cancelled, d still waiting behind b
    run_once(world, ids["c"], "sleepy", "succeed")
    done = chains(world).get(view.id)
    assert done.status is ChainStatus.CANCELLED and {lk.name: lk.status for lk in done.links}["d"] is TaskStatus.WAITING


def test_chains_must_be_dags_of_known_links() -> None:
    with pytest.raises(ValueError, match="cycle"):
        ChainSpec.model_validate(
            {
                "links": [
                    {"name": "a", "lambda": "work", "after": ["b"]},
                    {"name": "b", "lambda": "work", "after": ["a"]},
                ]
            }
        )
    with pytest.raises(ValueError, match="unknown"):
        ChainSpec.model_validate({"links": [{"name": "a", "lambda": "work", "after": ["z"]}]})


def test_reusing_a_chain_key_for_another_chain_is_a_conflict(world: World) -> None:
    chains(world).create(chain_spec())
    other = ChainSpec.model_validate({"links": [{"name": "x", "lambda": "work"}], "key": "album-42"})
    with pytest.raises(Conflict):
        chains(world).create(other)


def test_a_chain_repeated_naming_its_links_defaults_is_the_same_chain(world: World) -> None:
    # Given a keyed chain whose links leave out their priority and max_attempts
    first = chains(world).create(chain_spec())
    # When it is asked for again naming each link's lambda's defaults
    spec = chain_spec().model_dump(by_alias=True)
    for link in spec["links"]:
        lambda_spec = world.config.lambdas[link["lambda"]]
        link |= {"priority": lambda_spec.default_priority, "max_attempts": lambda_spec.max_attempts}
    again = chains(world).create(ChainSpec.model_validate(spec))
    # Then it is the same chain, not a conflict; another priority still conflicts
    assert again.id == first.id
    spec["links"][0]["priority"] = next(p for p in world.config.lambdas["work"].priorities if p != "normal")
    with pytest.raises(Conflict):
        chains(world).create(ChainSpec.model_validate(spec))


class CrashingStore:
    """The task store of a frontend that dies after writing `creates` tasks."""

    def __init__(self, store: Any, creates: int) -> None:
        self._store, self._left = store, creates

    def create(self, task: Any, fingerprint: str) -> Any:
        if self._left == 0:
            raise ConnectionError("the frontend died here")
        self._left -= 1
        return self._store.create(task, fingerprint)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class RecordingStore:
    """The task store, recording the status of each task created through it."""

    def __init__(self, store: Any) -> None:
        self._store, self.created = store, []

    def create(self, task: Any, fingerprint: str) -> Any:
        self.created.append(task.status)
        return self._store.create(task, fingerprint)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def half_made(world: World, spec: ChainSpec, creates: int) -> str:
    """A chain whose create wrote its item and `creates` links, then failed; its id."""
    crashing = Chains(cast(TaskStore, CrashingStore(world.store, creates)), world.items, world.config)  # type: ignore[attr-defined]
    swept = world.items.partition  # type: ignore[attr-defined]
    before = set(swept(CHAINS_PARTITION, to_ms(world.now + timedelta(minutes=1))))
    with pytest.raises(ConnectionError):
        crashing.create(spec, now=world.now)
    (item,) = set(swept(CHAINS_PARTITION, to_ms(world.now + timedelta(minutes=1)))) - before
    return str(item).removeprefix("#chain#")


def test_a_chain_whose_create_failed_part_way_is_made_whole_by_the_sweep(world: World) -> None:
    # Given a chain without a key whose create died after its item and its first link ("fetch", a root)
    spec = chain_spec().model_copy(update={"key": None})
    chain_id = half_made(world, spec, creates=1)
    ids = {link.name: link.task_id for link in chains(world).get(chain_id).links}
    assert world.store.get(ids["resize"]) is None and world.store.get(ids["report"]) is None
    # When the consumer's sweep comes to it
    world.advance(10)
    chains(world).sweep(world.now)
    # Then every link exists, as the create would have made it, and the chain runs to its end
    made = {name: world.store.get(task_id) for name, task_id in ids.items()}
    assert {name: task.status if task else None for name, task in made.items()} == {
        "fetch": TaskStatus.NEW,
        "resize": TaskStatus.WAITING,
        "notify": TaskStatus.WAITING,
        "report": TaskStatus.WAITING,
    }
    assert all(task is not None and task.chain == chain_id for task in made.values())
    run_once(world, ids["fetch"], "work", "succeed")
    assert chains(world).advance(chain_id) == 2
    run_once(world, ids["resize"], "work", "succeed")
    run_once(world, ids["notify"], "sleepy", "succeed")
    assert chains(world).advance(chain_id) == 1
    run_once(world, ids["report"], "work", "succeed")
    assert chains(world).get(chain_id).status is ChainStatus.SUCCEEDED


def test_an_executor_advancing_a_half_made_chain_creates_no_task_and_the_sweep_does(world: World) -> None:
    # Given a chain whose create died after its root, and the root's run
    chain_id = half_made(world, chain_spec().model_copy(update={"key": None}), creates=1)
    ids = {link.name: link.task_id for link in chains(world).get(chain_id).links}
    run_once(world, ids["fetch"], "work", "succeed")
    # When its executor advances the chain (a worker host's role creates no task), nothing is written or released
    assert chains(world).advance(chain_id) == 0
    assert [world.store.get(ids[name]) for name in ("resize", "notify", "report")] == [None, None, None]
    # Then the sweep, still due to look at it, writes the missing links and releases the two that may run
    world.advance(10)
    assert chains(world).sweep(world.now) == 2
    assert {name: world.store.get(ids[name]).status for name in ("resize", "notify", "report")} == {  # type: ignore[union-attr]
        "resize": TaskStatus.NEW,
        "notify": TaskStatus.NEW,
        "report": TaskStatus.WAITING,
    }


def test_a_half_made_chain_cancelled_leaves_no_link_to_run(world: World) -> None:
    # Given a chain whose create died before any link was written
    chain_id = half_made(world, chain_spec().model_copy(update={"key": None}), creates=0)
    # When it is cancelled, and the sweep comes to it later
    recording = RecordingStore(world.store)
    cancelled = Chains(cast(TaskStore, recording), world.items, world.config).cancel(chain_id)  # type: ignore[attr-defined]
    assert recording.created == [TaskStatus.WAITING] * 4, "a link written new could be claimed before its cancel"
    world.advance(10)
    chains(world).sweep(world.now)
    # Then every link was written cancelled: none of them runs
    assert cancelled.status is ChainStatus.CANCELLED
    statuses = {link.name: world.store.get(link.task_id) for link in cancelled.links}
    assert {name: task.status if task else None for name, task in statuses.items()} == dict.fromkeys(
        statuses, TaskStatus.CANCELLED
    )


def test_a_chain_made_whole_is_never_made_again(world: World) -> None:
    # Given a chain created whole, whose root then went missing from the table
    view = chains(world).create(chain_spec(), now=world.now)
    root = view.links[0].task_id
    assert world.items.delete(root)  # type: ignore[attr-defined]
    # When the sweep comes to it
    world.advance(10)
    chains(world).sweep(world.now)
    # Then nothing writes the root again: only a create that did not finish is completed
    assert world.store.get(root) is None


def test_a_half_made_chain_whose_root_failed_stays_in_the_sweep_until_it_is_whole(world: World) -> None:
    # Given a chain whose create died after its root, and the root then failed for good
    chain_id = half_made(world, chain_spec().model_copy(update={"key": None}), creates=1)
    ids = {link.name: link.task_id for link in chains(world).get(chain_id).links}
    run_once(world, ids["fetch"], "work", "fail")
    # When its executor advances it (failed: nothing of it can move)
    chains(world).advance(chain_id)
    # Then it stays in the sweep while marked, and the sweep still writes the links the create left out
    world.advance(10)
    chains(world).sweep(world.now)
    assert all(world.store.get(ids[name]) is not None for name in ("resize", "notify", "report"))


def test_a_chain_the_sweep_cannot_make_does_not_keep_it_from_the_others(world: World) -> None:
    # Given two half-made chains, the first with a link of a lambda the configuration has since lost
    broken = half_made(world, chain_spec().model_copy(update={"key": None}), creates=0)
    only_work = [{"name": "x", "lambda": "work"}, {"name": "y", "lambda": "work", "after": ["x"]}]
    whole = half_made(world, ChainSpec.model_validate({"links": only_work}), creates=0)
    lambdas = {name: spec for name, spec in world.config.lambdas.items() if name != "sleepy"}
    later = Chains(world.store, world.items, world.config.model_copy(update={"lambdas": lambdas}))  # type: ignore[attr-defined]
    # When the sweep comes to them, it says it failed
    world.advance(10)
    with pytest.raises(SweepFailed):
        later.sweep(world.now)
    # Then the other chain was made whole all the same
    assert all(world.store.get(link.task_id) is not None for link in chains(world).get(whole).links)
    assert broken != whole


def test_a_request_repeated_with_its_key_writes_the_links_an_unmarked_chain_lacks(world: World) -> None:
    # Given a chain whose item carries no mark (as 0.1.0 wrote it) and lacks a link
    view = chains(world).create(chain_spec(), now=world.now)
    assert world.items.delete(view.links[3].task_id)  # type: ignore[attr-defined]
    # When the request is repeated with its key, then the link is written again, as 0.1.0 did
    chains(world).create(chain_spec(), now=world.now)
    assert world.store.get(view.links[3].task_id) is not None


def _claim_from(world: World, priority: str) -> Any:
    """Poll, take the one message of the priority's queue and claim it as a controller would: the task."""
    world.consumer.poll()
    [message] = world.drain(priority)
    ref = TaskRef(message.task_id, "work", priority, message.flow_key)
    change = Change(now=world.now, attempt=message.attempt, entry_ms=message.due_ms, host="h:1")
    outcome = world.store.transition(ref, lifecycle.CLAIM, change)
    assert outcome.applied, "the claim of the message sent was refused"
    return outcome.task


def test_a_link_whose_priority_was_changed_is_retried_at_that_priority(world: World) -> None:
    # Given a chain whose second link an operator moved to high once it was released, and which then failed
    spec = ChainSpec.model_validate({"links": [{"name": "a", "lambda": "work"}, {"name": "b", "lambda": "work",
                                                                           "after": ["a"]}]})  # fmt: skip
    view = chains(world).create(spec, now=world.now)
    first = _claim_from(world, "normal")
    assert world.store.transition(TaskRef.of(first), lifecycle.SUCCEED, Change(now=world.now, attempt=1)).applied
    assert chains(world).advance(view.id, world.now) == 1
    b = view.links[1].task_id
    Scheduling(world.store, world.config, clock=lambda: world.now).amend(b, Amendment(priority="high"))
    world.advance(1)
    failed = _claim_from(world, "high")
    error = TaskError(type="E", message="broken", attempt=1, at=world.now, host="h:1")
    change = Change(now=world.now, attempt=1, next_at=world.now, error=error)
    assert world.store.transition(TaskRef.of(failed), lifecycle.FAIL_TO_DEAD_LETTER, change).applied
    # When it is retried in its chain
    chains(world).retry(view.id, "b")
    # Then it is sent on its own priority's queue, and its claim is taken (the chain's spec says normal)
    world.advance(1)
    assert _claim_from(world, "high").id == b


def test_a_change_made_from_a_stale_read_cannot_leave_a_task_under_the_old_priority(world: World) -> None:
    # Given a task read by one operator, then moved to high by another
    scheduling = Scheduling(world.store, world.config, clock=lambda: world.now)
    task = world.schedule(delay_seconds=30)
    stale = world.store.get(task.id)
    assert stale is not None
    scheduling.amend(task.id, Amendment(priority="high"))
    # When the first operator's change of payload lands, made from the read before the move
    outcome = amend(world.store, stale, Amendment(payload={"n": 2}), world.now)
    # Then it is refused, and the task is still due on the high queue, where its claim is taken
    assert not outcome.applied
    world.advance(40)
    assert _claim_from(world, "high").id == task.id


def _rewrite(world: World, item_id: str, field: str, text: str) -> None:
    """Put a stored spec as an earlier version wrote it, past checks added since."""
    world.dynamodb.update_item(  # type: ignore[attr-defined]
        TableName=world.config.table_name,
        Key={Attr.ID: {"S": item_id}},
        UpdateExpression="SET #f = :t",
        ExpressionAttributeNames={"#f": field},
        ExpressionAttributeValues={":t": {"S": text}},
    )


def _too_deep() -> dict[str, Any]:
    value: Any = 1
    for _ in range(MAX_JSON_DEPTH):
        value = [value]
    return {"a": value}


def test_a_chain_stored_before_a_check_was_added_still_reads_and_advances(world: World) -> None:
    # Given a chain stored with what a request may no longer carry: a link's priority "" and a deep payload
    view = chains(world).create(chain_spec(), now=world.now)
    raw = json.loads(world.items.get(f"#chain#{view.id}")["cspec"])  # type: ignore[attr-defined]
    raw["links"][1].update(priority="", payload=_too_deep())
    _rewrite(world, f"#chain#{view.id}", "cspec", json.dumps(raw))
    with pytest.raises(ValidationError):  # as a request, refused
        ChainSpec.model_validate(raw)
    # When it is read and swept, then it reads, and its links are where they were
    assert [link.name for link in chains(world).get(view.id).links] == ["fetch", "resize", "notify", "report"]
    world.advance(10)
    chains(world).sweep(world.now)
    assert chains(world).get(view.id).status == ChainStatus.RUNNING


def test_a_schedule_stored_before_a_check_was_added_still_reads(world: World) -> None:
    # Given a schedule stored with croniter's random field and a deep payload, refused as requests now
    schedules(world).put("old", ScheduleSpec.model_validate({"lambda": "work", "cron": "0 4 * * *"}), now=T)
    old = {"lambda": "work", "cron": "R 4 * * *", "payload": _too_deep()}
    _rewrite(world, schedule_id("old"), SPEC_FIELD, json.dumps(old))
    with pytest.raises(ValidationError):
        ScheduleSpec.model_validate(old)
    # When it is read and listed, then it is, as stored
    assert schedules(world).get("old").spec.cron == "R 4 * * *"
    assert [schedule.name for schedule in schedules(world).all()] == ["old"]


def test_a_schedule_stored_with_a_collection_refused_since_still_fires(world: World) -> None:
    # Given a schedule stored with the collection "." (refused as a request since: no gate's path can name it)
    spec = ScheduleSpec.model_validate({"lambda": "work", "every_seconds": 10, "overlap": "allow"})
    schedules(world).put("dot", spec, now=T)
    _rewrite(
        world, schedule_id("dot"), SPEC_FIELD, json.dumps({"lambda": "work", "every_seconds": 10, "collection": "."})
    )
    with pytest.raises(ValidationError):
        ScheduleSpec.model_validate({"lambda": "work", "every_seconds": 10, "collection": "."})
    # When its next occurrence is due, then it fires a task in that collection, as it did before
    world.now = T + timedelta(seconds=10)
    assert schedules(world).fire_due(world.now).created == 1
    fired = world.store.get(schedules(world).get("dot").last_task_id or "")
    assert fired is not None and fired.collection == "."


# -- limits, expiry, fair share -------------------------------------------------
def limited(world: World, **limits: Any) -> Limiter:
    lambdas = dict(world.config.lambdas)
    lambdas["work"] = lambdas["work"].model_copy(update={"limits": Limits(**limits)})
    clock = {"t": 1_000.0}
    limiter = Limiter(world.counters, world.config.model_copy(update={"lambdas": lambdas}), clock=lambda: clock["t"])  # type: ignore[attr-defined]
    limiter.clock = clock  # type: ignore[attr-defined]
    return limiter


def test_at_most_n_starts_per_second_across_hosts(world: World) -> None:
    host_a, host_b = limited(world, max_starts_per_second=3), limited(world, max_starts_per_second=3)
    host_b.clock = host_a.clock  # type: ignore[attr-defined]
    host_b._clock = host_a._clock
    grants = [h.acquire("work", "c", f"t{i}") for i, h in enumerate([host_a, host_b] * 3)]
    assert sum(isinstance(g, Grant) for g in grants) == 3
    host_a.clock["t"] += 1  # type: ignore[attr-defined]
    assert isinstance(host_a.acquire("work", "c", "next"), Grant)


def test_at_most_m_running_and_a_dead_workers_slot_expires(world: World) -> None:
    limiter = limited(world, max_running=2)
    first, second = limiter.acquire("work", "c", "a"), limiter.acquire("work", "c", "b")
    assert isinstance(first, Grant) and isinstance(second, Grant)
    assert isinstance(limiter.acquire("work", "c", "c"), Refusal)
    limiter.release(first)
    assert isinstance(limiter.acquire("work", "c", "c"), Grant)
    limiter.clock["t"] += world.config.timeouts.heartbeat + 1  # type: ignore[attr-defined]  # nobody renewed
    assert isinstance(limiter.acquire("work", "c", "d"), Grant)


def test_a_task_not_started_by_its_expire_at_ends_as_expired(world: World) -> None:
    task = world.schedule(expire_at=(world.now + timedelta(seconds=5)).isoformat(), delay_seconds=1)
    world.gate(__import__("atf_core.schema", fromlist=["GateAction"]).GateAction.PAUSE)
    world.advance(6)
    __import__("atf_core.gating", fromlist=["Gating"]).Gating(world.store, world.config).lift("work", None)
    assert world.consumer.poll().total(Event.EXPIRED) == 1
    assert world.status(task) is TaskStatus.EXPIRED
    with pytest.raises(InputError, match="expire_at"):
        world.schedule(expire_at=(world.now - timedelta(seconds=1)).isoformat())


def test_a_task_waiting_to_retry_at_its_expire_at_ends_expired_with_its_attempts_and_errors(world: World) -> None:
    # Given a task whose first attempt ran and failed, due to retry after its expire_at
    task = world.schedule(expire_at=(world.now + timedelta(seconds=5)).isoformat())
    world.consumer.poll()
    assert world.claim_all() == 1
    ref, error = TaskRef.of(task), TaskError(type="KeyError", message="k", attempt=1, at=world.now)
    retry_at = world.now + timedelta(seconds=10)
    assert world.store.transition(
        ref, lifecycle.FAIL_RETRIABLE, Change(now=world.now, attempt=1, next_at=retry_at, error=error)
    ).applied
    # When the consumer looks at it past its expire_at (its retry's time)
    world.advance(10)
    assert world.consumer.poll().total(Event.EXPIRED) == 1
    # Then it ends expired, not run again and not a dead letter, with the attempt it ran and that attempt's error
    expired = world.store.get(task.id)
    assert expired is not None and expired.status is TaskStatus.EXPIRED
    assert (expired.attempt, [e.type for e in expired.errors]) == (1, ["KeyError"]) and expired.claimed_at
    assert world.drain() == []


def test_fair_share_interleaves_collections() -> None:
    flood = [DueEntry(f"a{i}", "work", "flood", "normal", i) for i in range(6)]
    trickle = [DueEntry(f"b{i}", "work", "trickle", "normal", 10 + i) for i in range(2)]
    order = [e.collection for e in fair_share(iter(flood + trickle), window=8)][:4]
    assert order == ["flood", "trickle", "flood", "trickle"]
