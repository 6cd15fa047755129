"""Dead letters through the SDK: list by filter, inspect, redrive (dry run, drip rate, fresh
budget) and discard on the quiet stack; then a real failure redriven to success on the live one."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from atf_core.definitions import Attr
from atf_core.errors import InputError, UnknownLambda
from atf_core.schema import TaskStatus, to_ms
from atf_sdk.client import AtfClient
from tests.api.live import LiveStack
from tests.api.states import kill
from tests.functional.helpers import raw_item


@pytest.fixture
def dead(client: AtfClient, store: Any) -> dict[str, Any]:
    """Three dead letters of `chore` in a collection of their own: two KeyErrors and a ValueError.
    The oldest is of the lower priority, whose partitions are read last."""
    collection = f"dl-{uuid.uuid4().hex[:8]}"
    ids = []
    for error_type, priority in (("KeyError", "normal"), ("ValueError", "high"), ("KeyError", "normal")):
        task_id = client.schedule("chore", {"n": len(ids)}, collection=collection, priority=priority).id
        kill(store, task_id, error_type, host=f"host-{len(ids)}:7")
        ids.append(task_id)
    return {"collection": collection, "ids": ids}


def test_dead_letters_are_listed_oldest_first_by_collection_and_error_class(
    client: AtfClient, dead: dict[str, Any]
) -> None:
    everything = client.dead_letters("chore", collection=dead["collection"])
    assert [d.id for d in everything] == dead["ids"], "oldest first, across priorities and shards"
    assert [d.error_type for d in everything] == ["KeyError", "ValueError", "KeyError"]
    key_errors = client.dead_letters("chore", collection=dead["collection"], error_type="KeyError")
    assert [d.id for d in key_errors] == [dead["ids"][0], dead["ids"][2]]
    assert [d.id for d in client.dead_letters("chore", collection=dead["collection"], limit=1)] == dead["ids"][:1]


def test_dead_letters_are_listed_a_page_at_a_time(client: AtfClient, dead: dict[str, Any]) -> None:
    # Given three dead letters, when they are listed two at a time
    first = client.dead_letter_page("chore", collection=dead["collection"], limit=2)
    assert [d.id for d in first.dead_letters] == dead["ids"][:2] and first.next is not None
    # Then the next page, from the first's `next`, holds the rest and says it is the last
    rest = client.dead_letter_page("chore", collection=dead["collection"], limit=2, after=first.next)
    assert [d.id for d in rest.dead_letters] == dead["ids"][2:] and rest.next is None
    # And a page that holds all of them says so
    assert client.dead_letter_page("chore", collection=dead["collection"], limit=3).next is None


def test_a_time_window_selects_by_time_of_death(client: AtfClient, dead: dict[str, Any]) -> None:
    letters = client.dead_letters("chore", collection=dead["collection"])
    middle = letters[1].died_at
    after = client.dead_letters("chore", collection=dead["collection"], since=middle)
    before = client.dead_letters("chore", collection=dead["collection"], until=middle)
    assert [d.id for d in after] == dead["ids"][1:] and [d.id for d in before] == dead["ids"][:2]
    future = datetime.now(UTC) + timedelta(hours=1)
    assert client.dead_letters("chore", collection=dead["collection"], since=future) == []


def test_a_dead_letter_keeps_its_error_history(client: AtfClient, dead: dict[str, Any]) -> None:
    task = client.get(dead["ids"][1])
    assert task.status is TaskStatus.DEAD_LETTER
    assert [(e.type, e.attempt, e.host) for e in task.errors] == [("ValueError", 1, "host-1:7")]
    assert task.last_error is not None and task.last_error.type == "ValueError"


def test_a_dry_run_says_which_and_changes_nothing(client: AtfClient, dead: dict[str, Any]) -> None:
    dry = client.redrive("chore", collection=dead["collection"], error_type="KeyError", dry_run=True, per_second=2)
    assert dry.dry_run and dry.changed == 0
    assert [d.id for d in dry.matched] == [dead["ids"][0], dead["ids"][2]]
    assert dry.first_at is not None and dry.last_at is not None
    assert (dry.last_at - dry.first_at).total_seconds() == pytest.approx(0.5)
    assert dry.next is None and dry.until is None  # the whole selection: nothing to go on with
    # Limited to one of the two: where it ended, and the bound of the rest, the server's time of the call
    called_at = datetime.now(UTC) - timedelta(milliseconds=1)  # the answer's is to the millisecond
    part = client.redrive("chore", collection=dead["collection"], error_type="KeyError", dry_run=True, limit=1)
    assert part.more and part.next is not None and part.until is not None
    assert called_at <= part.until <= datetime.now(UTC)
    assert {client.get(i).status for i in dead["ids"]} == {TaskStatus.DEAD_LETTER}


def test_a_redrive_drips_the_selection_back_with_a_fresh_budget(
    client: AtfClient, store: Any, dead: dict[str, Any]
) -> None:
    done = client.redrive("chore", collection=dead["collection"], error_type="KeyError", per_second=1, budget=3)
    assert not done.dry_run and done.changed == 2
    assert done.first_at is not None and done.last_at is not None
    assert (done.last_at - done.first_at).total_seconds() == pytest.approx(1.0)
    first, second = (client.get(i) for i in (dead["ids"][0], dead["ids"][2]))
    assert first.status is second.status is TaskStatus.NEW
    # the consumer finds each due at its own time: the index says when
    due_ms = [int(raw_item(store, i)[Attr.INDEX_SK]) for i in (first.id, second.id)]
    assert due_ms == [to_ms(done.first_at), to_ms(done.last_at)]
    # attempts go on rising from where they were (the fencing token), with three more allowed
    assert (first.attempt, first.max_attempts) == (1, 4) and [e.type for e in first.errors] == ["KeyError"]
    remaining = client.dead_letters("chore", collection=dead["collection"])
    assert [d.id for d in remaining] == [dead["ids"][1]]
    again = client.redrive("chore", collection=dead["collection"], error_type="KeyError")
    assert (again.changed, again.matched) == (0, []), "a redriven task is no longer a dead letter"


def test_discard_ends_the_selection(client: AtfClient, dead: dict[str, Any]) -> None:
    dry = client.discard("chore", collection=dead["collection"], error_type="ValueError", dry_run=True)
    assert ([d.id for d in dry.matched], dry.changed) == ([dead["ids"][1]], 0)
    done = client.discard("chore", collection=dead["collection"], error_type="ValueError")
    assert done.changed == 1 and client.get(dead["ids"][1]).status is TaskStatus.FATAL_FAILURE
    assert len(client.dead_letters("chore", collection=dead["collection"])) == 2


def test_dead_letters_named_by_id_are_redriven_and_no_others(client: AtfClient, dead: dict[str, Any]) -> None:
    # Given three dead letters, when two are named by id (newest first) in a dry run and then for real
    chosen = [dead["ids"][2], dead["ids"][0]]
    dry = client.redrive("chore", ids=chosen, dry_run=True)
    assert [d.id for d in dry.matched] == dead["ids"][0:3:2] and dry.changed == 0, "oldest first"
    assert [d.error_type for d in dry.matched] == ["KeyError", "KeyError"] and not dry.more and dry.next is None
    listed = {d.id: d for d in client.dead_letters("chore", collection=dead["collection"])}
    assert dry.matched == [listed[i] for i in dead["ids"][0:3:2]], "as the listing has them, time of death too"
    done = client.redrive("chore", ids=chosen, budget=2)
    # Then those two are new again, and the other is still dead
    assert done.changed == 2 and [client.get(i).status for i in dead["ids"]] == [
        TaskStatus.NEW,
        TaskStatus.DEAD_LETTER,
        TaskStatus.NEW,
    ]
    discarded = client.discard("chore", ids=[dead["ids"][1]])
    assert discarded.changed == 1 and client.get(dead["ids"][1]).status is TaskStatus.FATAL_FAILURE


def test_an_id_that_is_no_dead_letter_of_the_lambda_refuses_the_whole_selection(
    client: AtfClient, dead: dict[str, Any], raw: Any
) -> None:
    waiting = client.schedule("chore", {}, delay_seconds=600).id
    other_lambda = client.schedule("work", {}, delay_seconds=600).id
    for stranger, said in (
        (waiting, f"{waiting} is not a dead letter: it is new"),
        (other_lambda, f"no task {other_lambda} of chore"),  # as if none: nothing told of another lambda's
        (unknown := uuid.uuid4().hex, f"no task {unknown} of chore"),
    ):
        body = {"ids": [dead["ids"][0], stranger]}
        for action in ("redrive", "discard"):
            reply = raw("POST", f"/v1/lambdas/chore/dead-letters/{action}", body)
            assert (reply.status, reply.body["code"], reply.body["field"]) == (404, "not_found", "ids[1]"), reply.body
            assert reply.body["message"] == said
    assert client.get(dead["ids"][0]).status is TaskStatus.DEAD_LETTER, "nothing changed"
    assert client.get(waiting).status is TaskStatus.NEW


def test_stats_count_the_dead_letters(client: AtfClient, dead: dict[str, Any]) -> None:
    before = client.stats("chore").dead_letters
    client.discard("chore", collection=dead["collection"], limit=1)
    assert before >= 3 and client.stats("chore").dead_letters == before - 1


def test_bad_selections_are_refused(client: AtfClient, raw: Any, item_count: Any) -> None:
    with pytest.raises(UnknownLambda):
        client.dead_letters("nope")
    with pytest.raises(InputError, match="until is before since") as window:  # as a redrive's and bulk's say it
        client.dead_letters("chore", since=datetime.now(UTC), until=datetime.now(UTC) - timedelta(hours=1))
    assert window.value.field == "until"
    before = item_count()
    for body, field in (
        ({"per_second": 0}, "per_second"),
        ({"budget": 101}, "budget"),
        ({"limit": 1001}, "limit"),
        ({"since": "2026-01-01T00:00:00"}, "since"),
        ({"dry_run": "maybe"}, "dry_run"),
        ({"lambda": "chore"}, "lambda"),
        ({"after": "yesterday"}, "after"),
        ({"after": "9" * 15 + "-" + "a" * 32}, "after"),  # of the pattern's form, past the year 9999
        ({"ids": []}, "ids"),
        ({"ids": ["a" * 32, "nope"]}, "ids[1]"),
        ({"ids": ["a" * 32] * 2}, "ids"),
        ({"ids": [f"{n:032x}" for n in range(101)]}, "ids"),
        ({"ids": ["a" * 32], "collection": "c"}, "ids"),
        ({"ids": ["a" * 32], "after": "1-" + "a" * 32}, "ids"),
        ({"ids": ["a" * 32, "b" * 32], "limit": 1}, "ids"),  # not one of them taken silently
    ):
        reply = raw("POST", "/v1/lambdas/chore/dead-letters/redrive", body)
        assert (reply.status, reply.body["field"]) == (400, field), reply.body
    assert raw("GET", "/v1/lambdas/chore/dead-letters?limit=0").body["field"] == "limit"
    assert raw("GET", "/v1/lambdas/chore/dead-letters?since=yesterday").body["field"] == "since"
    past_any_time = "9" * 15 + "-" + "a" * 32  # of the pattern's form, past the year 9999
    for after in ("yesterday", "12-" + "g" * 32, "-" + "a" * 32, "1" * 16 + "-" + "a" * 32, past_any_time):
        reply = raw("GET", f"/v1/lambdas/chore/dead-letters?after={after}")
        assert (reply.status, reply.body["field"]) == (400, "after"), reply.body
    assert item_count() == before


def test_a_failed_task_is_redriven_to_success_on_the_live_stack(live: LiveStack) -> None:
    client, collection = live.client, f"live-{uuid.uuid4().hex[:8]}"
    task_id = client.schedule("flaky", {"works_from": 3}, collection=collection).id
    failed = live.wait_for(lambda: client.get(task_id), lambda t: t.status is TaskStatus.DEAD_LETTER)
    assert [(e.type, e.attempt) for e in failed.errors] == [("ValueError", 1), ("ValueError", 2)]
    assert all(e.host for e in failed.errors), "each error names the host that ran the attempt"
    assert [d.id for d in client.dead_letters("flaky", collection=collection)] == [task_id]
    dry = client.redrive("flaky", collection=collection, dry_run=True, per_second=5)
    assert ([d.id for d in dry.matched], dry.changed) == ([task_id], 0)
    assert client.get(task_id).status is TaskStatus.DEAD_LETTER
    assert client.redrive("flaky", collection=collection, per_second=5, budget=2).changed == 1
    done = live.wait_for(lambda: client.get(task_id), lambda t: t.status is TaskStatus.SUCCESS)
    assert (done.attempt, done.max_attempts, len(done.errors)) == (3, 4, 2)
    assert client.dead_letters("flaky", collection=collection) == []
