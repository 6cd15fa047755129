"""The console's waiting tasks: a filtered selection cancelled, rescheduled or reprioritised at once, and one
waiting task changed, clicked through in headless Chromium against a real stack and worker host."""

from __future__ import annotations

import itertools
import uuid
from datetime import timedelta
from typing import Any

from atf_core.schema import Task, TaskStatus, utcnow
from tests.console.conftest import ConsoleStack
from tests.console.http import post

HOUR = 3600


def listed(page: Any) -> list[str]:
    # A click that navigates returns once the next page has begun to load, and all_inner_texts does not wait
    # for rows: CI once read none of a page still loading (under load, one run in many).
    page.wait_for_load_state("load")
    return page.locator("#waiting tbody tr td:first-child").all_inner_texts()


def message(page: Any) -> str:
    return page.locator("#message").inner_text()


def later(stack: ConsoleStack, count: int, collection: str, **options: Any) -> list[str]:
    return [
        stack.client.schedule("work", collection=collection, delay_seconds=HOUR, **options).id for _ in range(count)
    ]


def filter_by(page: Any, stack: ConsoleStack, collection: str) -> None:
    page.goto(f"{stack.console}/waiting")
    page.select_option("#waiting-filter select[name=lambda]", "work")
    page.fill("#waiting-filter input[name=collection]", collection)
    page.click("#waiting-filter button")


def test_a_selection_is_listed_dry_run_then_rescheduled_and_runs(console_stack: ConsoleStack, page: Any) -> None:
    # Given three tasks of one collection an hour ahead, and one of another collection
    collection, other = f"a{uuid.uuid4().hex[:8]}", f"b{uuid.uuid4().hex[:8]}"
    selected, untouched = later(console_stack, 3, collection), later(console_stack, 1, other)
    before = {t.id: t.next_at for t in console_stack.store.get_many(selected)}

    # When the operator filters by the collection: exactly those three are listed
    filter_by(page, console_stack, collection)
    assert sorted(listed(page)) == sorted(selected)

    # A dry run of a reschedule to a typed UTC time says what it would do, and changes nothing
    target = (utcnow() + timedelta(hours=2)).replace(microsecond=0)
    page.fill("#bulk input[name=run_at]", target.strftime("%Y-%m-%dT%H:%M:%S"))
    page.check("#bulk input[name=dry_run]")
    page.click("#bulk button[value=reschedule]")
    assert f"Would reschedule 3 waiting tasks (to run {target:%Y-%m-%d %H:%M:%S}" in message(page)
    assert {t.id: t.next_at for t in console_stack.store.get_many(selected)} == before

    # The real run, in a second: the three run now, the other collection's task still waits
    page.fill("#bulk input[name=delay_seconds]", "1")
    page.click("#bulk button[value=reschedule]")
    assert "Rescheduled 3 of 3 waiting tasks" in message(page)
    done = console_stack.wait_for(selected, lambda t: t.status is TaskStatus.SUCCESS)
    assert all(t.attempt == 1 for t in done)
    (waiting,) = console_stack.store.get_many(untouched)
    assert waiting.status is TaskStatus.NEW


def test_a_selection_is_reprioritised_then_cancelled(console_stack: ConsoleStack, page: Any) -> None:
    collection = f"c{uuid.uuid4().hex[:8]}"
    selected = later(console_stack, 2, collection, priority="low")
    filter_by(page, console_stack, collection)

    page.select_option("#bulk select[name=priority]", "high")
    page.click("#bulk button[value=reprioritise]")
    assert "Reprioritised 2 of 2 waiting tasks" in message(page)
    assert {t.priority for t in console_stack.store.get_many(selected)} == {"high"}

    page.click("#bulk button[value=cancel]")  # the page kept the filter
    assert "Cancelled 2 of 2 waiting tasks" in message(page)
    assert {t.status for t in console_stack.store.get_many(selected)} == {TaskStatus.CANCELLED}
    assert listed(page) == []


def test_a_reschedule_past_its_limit_goes_on_where_it_stopped(console_stack: ConsoleStack, page: Any) -> None:
    # Given three tasks of one collection an hour ahead, listed two at a time (the soonest two)
    collection = f"e{uuid.uuid4().hex[:8]}"
    selected = later(console_stack, 3, collection)
    filter_by(page, console_stack, collection)
    page.fill("#waiting-filter input[name=limit]", "2")
    page.click("#waiting-filter button")
    assert len(listed(page)) == 2

    # When the operator reschedules them half an hour ahead (before the rest), one a second
    page.fill("#bulk input[name=delay_seconds]", "1800")
    page.fill("#bulk input[name=per_second]", "1")
    page.click("#bulk button[value=reschedule]")
    assert "Rescheduled 2 of 2 waiting tasks" in message(page) and "More match" in message(page)
    # ...and goes on where it stopped
    page.click("#carry-on button")

    # Then the third is rescheduled (not the first two again), and nothing more is offered
    assert "Rescheduled 1 of 1 waiting tasks" in message(page) and "More match" not in message(page)
    assert page.locator("#carry-on").count() == 0
    # And the three run a second apart, each moved once, from the run time the first call resolved
    times = sorted(t.next_at for t in console_stack.store.get_many(selected) if t.next_at is not None)
    assert len(times) == 3 and [(b - a).total_seconds() for a, b in itertools.pairwise(times)] == [1.0, 1.0]
    assert timedelta(minutes=29) < times[0] - utcnow() <= timedelta(minutes=30)


def test_bad_bulk_input_names_the_field_and_changes_nothing(console_stack: ConsoleStack) -> None:
    collection = f"d{uuid.uuid4().hex[:8]}"
    waiting = later(console_stack, 1, collection)
    # No filter and no "all": refused naming all
    assert "invalid_input: the filter matches every waiting task" in post(
        console_stack, "/waiting", {"action": "cancel"}, status=400
    )
    # A reschedule without a time names run_at; an unknown priority names priority
    selection = {"lambda": "work", "collection": collection}
    assert "give run_at or delay_seconds" in post(
        console_stack, "/waiting", {**selection, "action": "reschedule"}, status=400
    )
    reply = post(console_stack, "/waiting", {**selection, "action": "reprioritise", "priority": "urgent"}, status=400)
    assert "unknown_priority: priority &#x27;urgent&#x27;" in reply
    (task,) = console_stack.store.get_many(waiting)
    assert (task.status, task.priority) == (TaskStatus.NEW, "normal")


def test_one_waiting_task_is_changed_from_its_page(console_stack: ConsoleStack, page: Any) -> None:
    (task_id,) = later(console_stack, 1, f"e{uuid.uuid4().hex[:8]}")
    page.goto(f"{console_stack.console}/tasks/{task_id}")

    # A payload that is not JSON is refused naming payload, and nothing changes
    page.fill("#change textarea[name=payload]", "{not json")
    page.click("#change button")
    assert "payload: not JSON" in message(page)
    assert "payload: not JSON" in post(console_stack, f"/tasks/{task_id}/change", {"payload": "{x"}, status=400)
    twice = post(console_stack, f"/tasks/{task_id}/change", {"payload": '{"a": {"n": 1, "n": 2}}'}, status=400)
    assert "malformed_json: payload: not JSON (&#x27;n&#x27; is given twice in one object) (payload.a.n)" in twice
    assert _task(console_stack, task_id).payload == {}

    # A new priority, payload and run time: the task runs with them
    page.select_option("#change select[name=priority]", "high")
    page.fill("#change input[name=delay_seconds]", "1")
    page.fill("#change textarea[name=payload]", '{"seconds": 0.01}')
    page.click("#change button")
    assert "Changed: new, priority high" in message(page)
    (done,) = console_stack.wait_for([task_id], lambda t: t.status is TaskStatus.SUCCESS)
    assert (done.priority, done.payload) == ("high", {"seconds": 0.01})

    # Once it has run, the page offers no change, and a change posted anyway is a conflict
    page.goto(f"{console_stack.console}/tasks/{task_id}")
    assert page.locator("#change").count() == 0
    reply = post(console_stack, f"/tasks/{task_id}/change", {"priority": "low"}, status=409)
    assert "conflict: task" in reply and "only a task not yet claimed can be changed" in reply
    assert _task(console_stack, task_id).priority == "high"


def _task(stack: ConsoleStack, task_id: str) -> Task:
    task = stack.store.get(task_id)
    assert task is not None
    return task


def test_the_busiest_flow_keys_are_listed_and_lead_to_their_waiting_tasks(
    console_stack: ConsoleStack, page: Any
) -> None:
    # Given a key with three tasks an hour ahead and another key with one
    tag = uuid.uuid4().hex[:8]
    collection, busy, quiet = f"k{tag}", f"busy-{tag}", f"quiet-{tag}"
    busy_ids = later(console_stack, 3, collection, flow_key=busy)
    later(console_stack, 1, collection, flow_key=quiet)

    # When the operator opens the overview: each key shows its waiting count, the busier first
    page.goto(console_stack.console)
    cells = [line.split("\t") for line in page.locator("#keys tbody tr").all_inner_texts()]
    rows = {r[1]: r for r in cells}
    assert rows[busy][0] == "work" and rows[busy][2] == "3" and rows[quiet][2] == "1"
    keys = [r[1] for r in cells]
    assert keys.index(busy) < keys.index(quiet)

    # Then the key's link lists exactly its waiting tasks, ready to act on
    page.click(f"#keys a:text-is('{busy}')")
    assert sorted(listed(page)) == sorted(busy_ids)
    assert page.locator("#waiting-filter input[name=flow_key]").input_value() == busy
