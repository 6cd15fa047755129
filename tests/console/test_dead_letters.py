"""The dead-letter page: its filter, checked as the API's dead-letter routes check theirs (over HTTP), and
what a redrive says it did."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime

import pytest

from atf_core.deadletters import BulkResult, DeadLetter, DeadLetterFilter, position_text
from atf_core.schema import TaskStatus
from atf_local.console.pages import redrive_carry_on, redrive_message
from tests.console.conftest import ConsoleStack
from tests.console.http import get, post


def dead_letters(console_stack: ConsoleStack, collection: str, count: int) -> list[str]:
    """`count` tasks of `work` in `collection` that fail for good (their payload's fatal), once dead letters."""
    schedule = console_stack.client.schedule
    ids = [schedule("work", {"fatal": "bad input"}, collection=collection).id for _ in range(count)]
    console_stack.wait_for(ids, lambda t: t.status is TaskStatus.DEAD_LETTER)
    return ids


@pytest.fixture(scope="module")
def dead_work(console_stack: ConsoleStack) -> list[str]:
    """Dead letters of the stack's first lambda, the one a page that named no lambda would show."""
    assert next(iter(console_stack.config.lambdas)) == "work"
    return dead_letters(console_stack, "filtered", 2)


def test_an_unknown_lambda_is_refused_not_swapped_for_the_first(
    console_stack: ConsoleStack, dead_work: list[str]
) -> None:
    page = get(console_stack, "/dead-letters?lambda=nope", status=400)
    assert "unknown_lambda" in page and "nope" in page, page[-2000:]
    # Neither the first lambda's letters nor a form that would redrive them
    assert 'id="redrive"' not in page and not any(i in page for i in dead_work)
    assert "<option selected>work" not in page


def test_the_header_link_without_a_lambda_shows_the_first(console_stack: ConsoleStack, dead_work: list[str]) -> None:
    page = get(console_stack, "/dead-letters")
    assert "<option selected>work" in page and 'id="redrive"' in page and all(i in page for i in dead_work)


@pytest.mark.parametrize(
    ("query", "named"),
    [("collection=bad%20coll", "collection"), ("error_type=1bad%20class", "error_type")],
    ids=["a collection no task can carry", "an error class no exception has"],
)
def test_a_filter_the_api_refuses_is_refused_naming_the_field(
    console_stack: ConsoleStack, dead_work: list[str], query: str, named: str
) -> None:
    page = get(console_stack, f"/dead-letters?lambda=work&{query}", status=400)
    assert "invalid_input" in page and named in page, page[-2000:]
    assert 'id="redrive"' not in page


@pytest.mark.parametrize(
    "form",
    [{"lambda": "nope"}, {"lambda": ""}, {"lambda": "work", "collection": "bad coll"}],
    ids=["an unknown lambda", "no lambda", "a bad collection"],
)
def test_a_redrive_of_a_refused_selection_changes_nothing(
    console_stack: ConsoleStack, dead_work: list[str], form: dict[str, str]
) -> None:
    page = post(console_stack, "/dead-letters/redrive", form, status=400)
    assert "unknown_lambda" in page or "invalid_input" in page, page[-2000:]
    assert 'id="redrive"' not in page
    assert all(t.status is TaskStatus.DEAD_LETTER for t in console_stack.store.get_many(dead_work))


def _result(dry_run: bool, more: bool) -> BulkResult:
    died = datetime(2026, 1, 1, tzinfo=UTC)
    letters = [DeadLetter(f"{i:032x}", "work", "c", "normal", "Fatal", died) for i in range(3)]
    next_ = position_text(letters[-1]) if more else None
    return BulkResult(dry_run, letters, changed=0 if dry_run else 3, more=more, next=next_)


@pytest.mark.parametrize("dry_run", [False, True], ids=["a redrive", "a dry run"])
def test_the_redrive_message_says_when_more_of_the_selection_are_dead(dry_run: bool) -> None:
    # Given a call that reached the oldest `limit` letters of a selection that holds more (the core's `more`)
    said = redrive_message(_result(dry_run, more=True))
    # Then the message says more are dead, and that Go on takes the next ones
    assert "More of the selection are dead" in said and "Go on takes the next ones" in said, said
    # And a call that reached the whole selection says nothing of the kind
    assert "More" not in redrive_message(_result(dry_run, more=False))


def test_a_dripped_redrive_says_another_redrive_before_its_drip_ends_doubles_the_rate() -> None:
    # Given a redrive that dripped its letters over a minute and reached part of its selection
    start = datetime(2026, 1, 1, tzinfo=UTC)
    result = _result(dry_run=False, more=True)
    result.first_at, result.last_at = start, start.replace(minute=1)
    # Then its message says when its drip ends, and that another redrive before then runs beside it
    said = redrive_message(result)
    assert "Another redrive before 2026-01-01 00:01:00.000 UTC, Go on's too, starts its own drip" in said, said
    # And a dry run over the same span, or a redrive that sent its letters at once, says nothing of the kind
    dry_run = _result(dry_run=True, more=True)
    dry_run.first_at, dry_run.last_at = result.first_at, result.last_at
    assert "drip" not in redrive_message(dry_run)
    result.last_at = start
    assert "drip" not in redrive_message(result)


@pytest.mark.parametrize("dry_run", [False, True], ids=["a redrive", "a dry run"])
def test_a_redrive_that_reached_part_of_its_selection_goes_on_past_it_with_the_same_choices(dry_run: bool) -> None:
    # Given a call that reached part of its selection, at a drip rate
    listed_at = datetime(2026, 1, 1, 0, 5, tzinfo=UTC)
    chosen = DeadLetterFilter("work", "c", "Fatal", until=listed_at, limit=3)
    form = {"per_second": "2"} | ({"dry_run": "1"} if dry_run else {})
    result = _result(dry_run, more=True)
    # Then its Go on form carries the same selection, rate and dry run, and goes on past the last letter reached
    # through the letters dead when the selection was listed
    carried = carry_on_fields(redrive_carry_on(chosen, form, result))
    assert carried == {"lambda": "work", "collection": "c", "error_type": "Fatal", "limit": "3", **form,
                       "after": position_text(result.matched[-1]), "until": listed_at.isoformat()}  # fmt: skip
    # And a call that reached the whole selection offers none
    assert redrive_carry_on(chosen, form, _result(dry_run, more=False)) == ""


def carry_on_fields(page: str) -> dict[str, str]:
    """The hidden fields of a page's Go on form."""
    return form_fields(page, "carry-on")


def form_fields(page: str, form_id: str) -> dict[str, str]:
    """The hidden fields of a page's redrive form `form_id` (it must be there)."""
    found = re.search(rf'<form method="post" action="/dead-letters/redrive" id="{form_id}">(.*?)</form>', page)
    assert found is not None, page[-2000:]
    hidden = re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', found[1])
    return {name: html.unescape(value) for name, value in hidden}


def test_go_on_lists_the_next_letters_of_a_selection_a_dry_run_reached_part_of(
    console_stack: ConsoleStack, dead_work: list[str]
) -> None:
    # Given the two dead letters of a collection, and a dry run that reaches the oldest one alone
    selection = {"lambda": "work", "collection": "filtered", "limit": "1", "dry_run": "1"}
    first = post(console_stack, "/dead-letters/redrive", selection)
    said = "Would redrive 1 of the oldest 1 matching dead letters, starting"
    assert said in first and "Go on takes the next ones" in first, first[-3000:]
    [oldest] = listed(first)
    # When Go on is pressed
    go_on = carry_on_fields(first)
    second = post(console_stack, "/dead-letters/redrive", go_on)
    # Then the next letter is reached, the end of the selection: no more to go on with, and nothing was written
    assert "Would redrive 1 of 1 matching dead letters" in second and 'id="carry-on"' not in second, second[-3000:]
    assert all(t.status is TaskStatus.DEAD_LETTER for t in console_stack.store.get_many(dead_work))
    # And the page lists the letter it reached, which its redrive form acts on (it goes on from the same place)
    assert listed(second) == [other for other in dead_work if other != oldest]
    assert form_fields(second, "redrive")["after"] == go_on["after"]
    # And a refused rate on that page leaves it as it was: the same letters, the same place
    refused = post(
        console_stack, "/dead-letters/redrive", form_fields(second, "redrive") | {"per_second": "-1"}, status=400
    )
    assert "invalid_input: per_second: " in refused, refused[-3000:]
    assert listed(refused) == listed(second) and form_fields(refused, "redrive")["after"] == go_on["after"]


def listed(page: str) -> list[str]:
    """The ids of the dead letters a page lists."""
    return re.findall(r'<td><a href="/tasks/(\w+)">', page)


@pytest.mark.parametrize(
    ("field", "value"),
    [("after", "not-a-position"), ("after", f"{'9' * 15}-{'0' * 32}"), ("limit", "0"), ("limit", "-1")],
    ids=["a bad after", "an after past any time", "a zero limit", "a negative limit"],
)
def test_a_redrive_with_a_bad_after_or_limit_is_refused_naming_it(
    console_stack: ConsoleStack, dead_work: list[str], field: str, value: str
) -> None:
    page = post(
        console_stack, "/dead-letters/redrive", {"lambda": "work", "collection": "filtered", field: value}, status=400
    )
    # The refusal names the field itself (the filter form holds an input of each name whatever it says), on the
    # dead-letter page (not the overview a failed action is sent back to)
    assert re.search(rf"invalid_input: {field}\b", page) and "<h2>Dead letters</h2>" in page, page[-2000:]
    if field == "limit":  # a whole number out of range: the API's own words for it
        assert "limit: Input should be greater than or equal to 1" in page, page[-2000:]
    assert all(t.status is TaskStatus.DEAD_LETTER for t in console_stack.store.get_many(dead_work))


def test_go_on_after_a_redrive_takes_the_letters_dead_when_listed_not_those_that_died_again(
    console_stack: ConsoleStack,
) -> None:
    # Given two dead letters of their own collection, listed one at a time
    ids = dead_letters(console_stack, "died-again", 2)
    listing = get(console_stack, "/dead-letters?lambda=work&collection=died-again&limit=1")
    [first] = listed(listing)
    # When the page's redrive takes the one listed, and it fails for good again, dying after the listing
    redriven = post(console_stack, "/dead-letters/redrive", form_fields(listing, "redrive"))
    assert "Redrove 1 of the oldest 1 matching dead letters" in redriven and "Go on takes the next ones" in redriven
    console_stack.wait_for([first], lambda t: t.status is TaskStatus.DEAD_LETTER and len(t.errors) == 2)
    # And Go on is pressed
    went_on = post(console_stack, "/dead-letters/redrive", carry_on_fields(redriven))
    # Then it redrives the other one alone, and the selection ends there: the letter that died again is not in it
    assert "Redrove 1 of 1 matching dead letters" in went_on and 'id="carry-on"' not in went_on, went_on[-3000:]
    assert console_stack.store.get(first).status is TaskStatus.DEAD_LETTER  # type: ignore[union-attr]
    [other] = [i for i in ids if i != first]
    console_stack.wait_for([other], lambda t: t.status is TaskStatus.DEAD_LETTER and len(t.errors) == 2)


def test_ticked_letters_are_redriven_alone_and_one_no_longer_dead_refuses_them_all(
    console_stack: ConsoleStack,
) -> None:
    # Given three dead letters of a collection, listed on the page
    ids = dead_letters(console_stack, "ticked", 3)
    page = get(console_stack, "/dead-letters?lambda=work&collection=ticked")
    assert all(f'name="tick.{i}"' in page for i in ids), page[-3000:]
    listing = form_fields(page, "redrive")
    # When none is ticked, the ticked redrive is refused naming ids; when one no dead letter is ticked, too
    refused = post(console_stack, "/dead-letters/redrive", listing | {"which": "ticked"}, status=400)
    assert "invalid_input: tick the dead letters" in refused and listed(refused) == listed(page)
    refused = post(console_stack, "/dead-letters/redrive", listing | {"which": "all"}, status=400)
    assert "invalid_input: which: &#x27;all&#x27; is neither listed nor ticked" in refused, refused[-3000:]
    stranger = console_stack.client.schedule("work", {}, delay_seconds=600).id
    ticked = {f"tick.{ids[0]}": "1", f"tick.{stranger}": "1"}
    refused = post(console_stack, "/dead-letters/redrive", listing | ticked | {"which": "ticked"}, status=404)
    assert f"not_found: {stranger} is not a dead letter: it is new (ids[1])" in html.unescape(refused), refused[-3000:]
    assert f'name="tick.{ids[0]}" value="1" form="redrive" aria-label="tick {ids[0]}" checked>' in refused, "kept"
    assert all(t.status is TaskStatus.DEAD_LETTER for t in console_stack.store.get_many(ids))
    # Then two ticked are redriven: they run again and fail again (their payload's fatal), a second error each;
    # the third was not, and keeps its one error
    ticked = {f"tick.{ids[2]}": "1", f"tick.{ids[0]}": "1"}
    done = post(console_stack, "/dead-letters/redrive", listing | ticked | {"which": "ticked"})
    assert "Redrove 2 of 2 matching dead letters" in done, done[-3000:]
    console_stack.wait_for([ids[0], ids[2]], lambda t: t.status is TaskStatus.DEAD_LETTER and len(t.errors) == 2)
    [untouched] = console_stack.store.get_many([ids[1]])
    assert untouched.status is TaskStatus.DEAD_LETTER and len(untouched.errors) == 1


def test_the_page_says_how_many_the_whole_selection_holds(console_stack: ConsoleStack, dead_work: list[str]) -> None:
    page = get(console_stack, "/dead-letters?lambda=work&collection=filtered&limit=1")
    assert '<p id="held">1 listed; the selection holds 2.</p>' in page, page[-3000:]
    assert len(listed(page)) == 1
