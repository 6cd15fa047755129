"""The local web console, end to end: a real stack and worker host, clicked through in headless Chromium."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from atf_core.schema import Task, TaskStatus
from atf_sdk.snapshot import Snapshot
from atf_sdk.worker.controller import ControllerSettings
from tests.console.conftest import ConsoleStack
from tests.console.http import get, post


def finished(task: Task) -> bool:
    return task.status.terminal or task.status is TaskStatus.DEAD_LETTER


def cell(page: Any, table: str, row: tuple[str, str], column: str) -> str:
    """The text of one cell of the tasks table, found by its row's lambda and priority and its column's header."""
    headers = [h.strip() for h in page.locator(f"#{table} thead th").all_inner_texts()]
    for tr in page.locator(f"#{table} tbody tr").all():
        cells = [c.strip() for c in tr.locator("td").all_inner_texts()]
        if tuple(cells[:2]) == row:
            return cells[headers.index(column)] if column in headers else "0"
    raise AssertionError(f"no row {row} in #{table}")


def test_overview_counts_tasks_by_state_per_lambda_and_priority(
    console_stack: ConsoleStack, page: Any, tmp_path: Path
) -> None:
    client = console_stack.client
    ids = [client.schedule("work", {"seconds": 0.05}, priority="high").id for _ in range(3)]
    ids.append(client.schedule("work", {"succeed_on": 2}, priority="low").id)
    console_stack.wait_for(ids, finished)

    page.goto(console_stack.console)
    assert int(cell(page, "tasks", ("work", "high"), "success")) >= 3
    assert int(cell(page, "tasks", ("work", "low"), "success")) >= 1
    assert page.locator("#lambda-gates").inner_text().count("open") == 2
    # The histogram counts every task that started, the retried one by its first start
    counts = [int(c) for c in page.locator("#lag-work td.n").all_inner_texts()]
    assert sum(counts) >= 4
    page.screenshot(path=str(tmp_path / "overview.png"), full_page=True)
    assert (tmp_path / "overview.png").stat().st_size > 10_000


def test_find_a_task_by_id_shows_its_errors_per_attempt(console_stack: ConsoleStack, page: Any) -> None:
    task_id = console_stack.client.schedule("work", {"succeed_on": 3}, collection="flaky").id
    console_stack.wait_for([task_id], finished)

    page.goto(console_stack.console)
    page.fill("input[name=id]", task_id)
    page.click("text=Find task")
    assert page.locator("#task-id").inner_text() == task_id
    assert "success" in page.locator("#task").inner_text()
    rows = [r.locator("td").all_inner_texts() for r in page.locator("#errors tbody tr").all()]
    assert [(r[0], r[2]) for r in rows] == [("1", "Retry"), ("2", "Retry")]
    assert "attempt 2 fails on purpose" in rows[1][3]


def test_an_unknown_task_id_is_a_404_page(console_stack: ConsoleStack, page: Any) -> None:
    response = page.goto(f"{console_stack.console}/tasks/{'0' * 32}")
    assert response.status == 404
    assert "No task" in page.locator("#message").inner_text()


def test_pause_holds_the_lambdas_tasks_until_resume(console_stack: ConsoleStack, page: Any) -> None:
    page.goto(console_stack.console)
    page.click("button.pause[data-gate='mail/*']")
    assert "Pause gate on mail/*" in page.locator("#message").inner_text()
    assert "paused" in page.locator("#lambda-gates").inner_text()
    # A gate takes effect within a consumer poll (one begun before it may still send) and a controller's gate
    # refresh (README, "gates"): tasks scheduled after that window are held.
    time.sleep(console_stack.config.poll_interval + ControllerSettings.gate_refresh_s + 0.5)

    ids = [console_stack.client.schedule("mail", {"n": n}).id for n in range(3)]
    time.sleep(3)  # six consumer polls and more than one receive wait of the host
    assert {t.status for t in console_stack.store.get_many(ids)} == {TaskStatus.NEW}
    page.reload()
    assert cell(page, "tasks", ("mail", "normal"), "new") == "3"

    page.click("#gates button.resume[data-gate='mail/*']")
    assert "Resumed mail/*" in page.locator("#message").inner_text()
    done = console_stack.wait_for(ids, finished)
    assert {t.status for t in done} == {TaskStatus.SUCCESS}
    page.reload()
    assert cell(page, "tasks", ("mail", "normal"), "new") == "0"


def test_a_drop_gate_on_a_collection_drops_its_tasks(console_stack: ConsoleStack, page: Any) -> None:
    page.goto(console_stack.console)
    page.select_option("#gate-form select[name=lambda]", "work")
    page.fill("#gate-form input[name=collection]", "spam")
    page.click("#gate-form button.drop")
    assert "Drop gate on work/spam" in page.locator("#message").inner_text()

    dropped, kept = (console_stack.client.schedule("work", collection=c).id for c in ("spam", "ham"))
    (dropped_task, kept_task) = console_stack.wait_for([dropped, kept], finished)
    assert (dropped_task.status, kept_task.status) == (TaskStatus.DROPPED, TaskStatus.SUCCESS)
    page.click("#gates button.resume[data-gate='work/spam']")
    assert "Resumed work/spam" in page.locator("#message").inner_text()
    assert "work/spam" not in page.locator("#gates").inner_text()


def test_dead_letters_are_filtered_and_a_filtered_selection_is_redriven(console_stack: ConsoleStack, page: Any) -> None:
    client = console_stack.client
    selected = [client.schedule("work", {"fatal": "bad input"}, collection="billing").id for _ in range(2)]
    other = client.schedule("work", {"fatal": "bad input"}, collection="reports").id
    console_stack.wait_for([*selected, other], lambda t: t.status is TaskStatus.DEAD_LETTER)

    page.goto(f"{console_stack.console}/dead-letters")
    page.select_option("#filter select[name=lambda]", "work")
    page.fill("#filter input[name=collection]", "billing")
    page.click("#filter button")
    page.wait_for_load_state("load")  # the click returns as the next page begins to load; the rows may not be in
    listed = page.locator("#dead-letters tbody tr td:nth-child(2)").all_inner_texts()
    assert sorted(listed) == sorted(selected)

    page.check("#redrive input[name=dry_run]")
    page.click("#redrive button.resume")
    assert "Would redrive 2 of 2" in page.locator("#message").inner_text()
    # A rate the redrive route would refuse is refused here, with the route's reason, and nothing moves
    for rate, reason in (("abc", "must be a number"), ("nan", "a finite number"), ("-1", "greater than 0")):
        page.fill("#redrive input[name=per_second]", rate)
        page.click("#redrive button.resume")
        said = page.locator("#message").inner_text()
        assert "per_second" in said and reason in said, said
    assert all(t.status is TaskStatus.DEAD_LETTER for t in console_stack.store.get_many(selected))

    page.click("#redrive button.resume")  # the page kept the filter; the dry run box is clear again
    assert "Redrove 2 of 2" in page.locator("#message").inner_text()
    # They run again (and fail again, into the dead letters, with a second error); the other stays put
    again = console_stack.wait_for(selected, lambda t: t.status is TaskStatus.DEAD_LETTER and len(t.errors) == 2)
    assert all(t.attempt == 2 for t in again)
    untouched = console_stack.store.get(other)
    assert untouched is not None and len(untouched.errors) == 1

    # And one letter ticked in its row is redriven alone, by "Redrive the ticked" (its box belongs to the form)
    page.goto(f"{console_stack.console}/dead-letters?lambda=work&collection=billing")  # listed afresh
    page.check(f"#dead-letters input[aria-label='tick {selected[1]}']")
    page.click("#redrive button[name=which]")
    assert "Redrove 1 of 1" in page.locator("#message").inner_text()
    console_stack.wait_for(selected[1:], lambda t: t.status is TaskStatus.DEAD_LETTER and len(t.errors) == 3)
    assert [len(t.errors) for t in console_stack.store.get_many(selected[:1])] == [2]


def test_the_snapshot_feeds_atf_top(console_stack: ConsoleStack) -> None:
    with urllib.request.urlopen(f"{console_stack.console}/api/snapshot", timeout=10) as reply:
        snapshot = Snapshot.model_validate(json.loads(reply.read()))
    assert {(r.lambda_, r.priority) for r in snapshot.rows} == {
        ("work", "high"), ("work", "normal"), ("work", "low"), ("mail", "normal"),
    }  # fmt: skip
    assert snapshot.dead_letters is not None and set(snapshot.dead_letters) == {"work", "mail"}


@pytest.mark.parametrize("origin", ["http://evil.example", "null"], ids=["another site", "an opaque page"])
def test_a_post_from_another_origin_is_refused(console_stack: ConsoleStack, origin: str) -> None:
    # "null" is what a sandboxed frame or a data: page of any site sends
    request = urllib.request.Request(
        f"{console_stack.console}/gates",
        data=b"action=pause&lambda=work",
        headers={"Origin": origin, "Content-Type": "application/x-www-form-urlencoded"},
    )
    try:
        urllib.request.urlopen(request, timeout=10)
        raise AssertionError("the console accepted a cross-origin POST")
    except urllib.error.HTTPError as error:
        assert error.code == 403
    assert not console_stack.client.gates()


@pytest.mark.parametrize(
    "headers",
    [{}, {"Referer": "http://evil.example/page"}, {"Referer": "null"}],
    ids=["neither Origin nor Referer", "a Referer elsewhere", "a Referer of no page"],
)
def test_a_post_that_names_no_console_page_is_refused(console_stack: ConsoleStack, headers: dict[str, str]) -> None:
    # curl -X POST -d 'lambda=work&action=pause' .../gates: no Origin, so nothing says the console sent it
    request = urllib.request.Request(
        f"{console_stack.console}/gates", data=b"action=pause&lambda=work", headers=headers
    )
    try:
        urllib.request.urlopen(request, timeout=10)
        console_stack.client.resume("work")  # taken: lift the gate, so the tests after this one are not held
        raise AssertionError("the console accepted a POST that names none of its pages")
    except urllib.error.HTTPError as error:
        assert error.code == 403
        assert "Origin" in error.read().decode()
    assert not console_stack.client.gates()


def test_a_post_without_origin_from_a_console_page_is_taken(console_stack: ConsoleStack) -> None:
    # A browser that sent no Origin still names the page: its Referer, one of the console's
    request = urllib.request.Request(
        f"{console_stack.console}/gates",
        data=b"action=pause&lambda=mail&reason=referer",
        headers={"Referer": f"{console_stack.console}/?refresh=5"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            assert "Pause gate on mail/*" in reply.read().decode()
        assert [g.scope for g in console_stack.client.gates()] == ["mail/*"]
    finally:  # the other tests run mail's tasks
        console_stack.client.resume("mail")


@pytest.mark.parametrize(
    ("form", "named"),
    [
        ({"lambda": "work", "action": "bogus"}, "action"),
        ({"lambda": "work", "action": "pause", "collection": "bad coll!"}, "collection"),
    ],
    ids=["an unknown action", "a collection no task can carry"],
)
def test_a_gate_form_the_core_refuses_answers_400_with_a_page_naming_the_field(
    console_stack: ConsoleStack, form: dict[str, str], named: str
) -> None:
    # Given the gate form, filled with a value the API's models refuse; when it is sent (the connection had dropped)
    page = post(console_stack, "/gates", form, status=400)
    # Then the overview says why, naming the field, and no gate was set
    assert "invalid_input" in page and named in page and "<title>Overview" in page, page[-2000:]
    assert not console_stack.client.gates()


@pytest.mark.parametrize(
    ("origin", "host", "taken"),
    [
        ("http://127.0.0.1:8081", "127.0.0.1:8081", True),
        ("http://localhost:8081", "localhost:8081", True),
        ("http://[::1]:8081", "[::1]:8081", True),
        # a page of a site whose name resolves to 127.0.0.1 (DNS rebinding) names its own host in both
        ("http://rebound.example:8081", "rebound.example:8081", False),
    ],
)
def test_a_post_is_taken_only_from_the_console_on_a_loopback_name(origin: str, host: str, taken: bool) -> None:
    from atf_local.console.server import _from_console

    assert _from_console(origin, None, host) is taken


@pytest.mark.parametrize(("query", "refresh"), [("?refresh=5", "5"), ("?refresh=x", None), ("", None)])
def test_the_overview_refreshes_itself_only_when_asked_in_seconds(
    console_stack: ConsoleStack, query: str, refresh: str | None
) -> None:
    page = get(console_stack, f"/{query}")
    tag = '<meta http-equiv="refresh"'
    assert (f'{tag} content="{refresh}">' in page) if refresh else (tag not in page)
