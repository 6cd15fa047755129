"""The console's view of waiting tasks: a selection to cancel, reschedule or reprioritise at once, and the
form that changes one task no executor has claimed.

Forms are read into the API's own request models (atf_core.api), so a bad field is refused with the
same error, naming the same field, as `POST /v1/tasks/bulk/...` and `POST /v1/tasks/{id}/change` give.
Times typed into the forms are UTC, as the console shows every time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from html import escape
from typing import Any, TypeVar
from urllib.parse import quote

from pydantic import BaseModel, ValidationError

from atf_core.api import (
    BulkReprioritiseRequest,
    BulkRescheduleRequest,
    RedriveRequest,
    TaskAmendmentRequest,
    TaskSelection,
)
from atf_core.bulk import WAITING, BulkChange
from atf_core.config import StackConfig
from atf_core.deadletters import DeadLetterFilter
from atf_core.errors import InputError, MalformedJson, field_path, input_error
from atf_core.schema import NameGivenTwice, Task, decode_json
from atf_core.vocabulary import MAX_BULK
from atf_local.console.pages import TICKED, cell, hidden_fields, table, when

ACTIONS: dict[str, type[TaskSelection]] = {
    "cancel": TaskSelection,
    "reschedule": BulkRescheduleRequest,
    "reprioritise": BulkReprioritiseRequest,
}
SELECTION_FIELDS = ("lambda", "collection", "flow_key", "status", "since", "until", "all", "limit")
ACTION_FIELDS = ("run_at", "delay_seconds", "priority", "per_second", "dry_run")
# What goes on with an action the answer said more of: its own fields, and where it stopped
CARRIED_ON = {
    "cancel": ("per_second", "dry_run"),
    "reschedule": ("per_second", "dry_run"),  # and the run time the first call resolved
    "reprioritise": ("priority", "per_second", "dry_run"),
}
WHOLE_FIELDS = ("limit",)
TIME_FIELDS = ("since", "until", "run_at")
NUMBER_FIELDS = ("delay_seconds", "per_second")  # a form's text: read as the number the API's JSON would carry
M = TypeVar("M", bound=BaseModel)
PAST = {"cancel": "Cancelled", "reschedule": "Rescheduled", "reprioritise": "Reprioritised"}


def selection_request(form: Mapping[str, str], action: str = "cancel") -> TaskSelection:
    """The form as the bulk route's request for `action` (cancel: the selection alone)."""
    if action not in ACTIONS:
        raise InputError(f"action {action!r} is not one of {sorted(ACTIONS)}", "action")
    fields = SELECTION_FIELDS + (ACTION_FIELDS if action != "cancel" else ("per_second", "dry_run")) + ("cursor",)
    return _parsed(ACTIONS[action], form, fields)


def dead_letter_selection(config: StackConfig, form: Mapping[str, str], now: datetime) -> DeadLetterFilter:
    """The dead-letter page's filter, checked as the dead-letter routes check theirs: a lambda the stack
    has (UnknownLambda, naming it, if not) and a collection and error class their patterns take. It holds
    the letters dead by the form's `until`, or by `now` without one: the page's forms carry it, so a redrive
    and its Go on step through the letters dead when the selection was listed, not those that die again
    once redriven (their new time of death is past any `after`)."""
    lambda_name = form.get("lambda", "")
    config.lambda_named(lambda_name)
    chosen = _parsed(RedriveRequest, form, ("collection", "error_type", "limit", "until")).filter(lambda_name)
    return chosen if chosen.until is not None else replace(chosen, until=now)


def ticked_dead_letters(config: StackConfig, form: Mapping[str, str]) -> DeadLetterFilter:
    """The dead letters ticked on the page (its rows' boxes), as the redrive route checks `ids`: each a dead
    letter of the lambda, or the whole redrive is refused naming it."""
    lambda_name = form.get("lambda", "")
    config.lambda_named(lambda_name)
    ids = [name.removeprefix(TICKED) for name, value in form.items() if name.startswith(TICKED) and value]
    if not ids:
        raise InputError("tick the dead letters to redrive, or redrive them all", "ids")
    return _parsed(RedriveRequest, {"ids": ids}, ("ids",)).filter(lambda_name)


def listing_start(form: Mapping[str, str]) -> RedriveRequest:
    """Where the page's listing starts: past the form's `after` (a Go on's), checked as the redrive route
    checks it; the oldest of the selection without one."""
    return _parsed(RedriveRequest, form, ("after",))


def redrive_options(form: Mapping[str, str]) -> RedriveRequest:
    """The dead-letter page's redrive, as the redrive route checks it: its rate (blank: all at once), dry
    run, and where it goes on from (the carry-on form's `after`: the last call's `next`). The selection is
    dead_letter_selection's."""
    return _parsed(RedriveRequest, form, ("per_second", "dry_run", "after"))


def amendment_request(form: Mapping[str, str]) -> TaskAmendmentRequest:
    """The change form as `POST /v1/tasks/{id}/change`'s request; a blank field is left as it is."""
    given = dict(form)
    if given.get("payload", "").strip():
        try:
            given["payload"] = decode_json(given["payload"])  # as the API reads a body: a name given twice too
        except NameGivenTwice as twice:
            raise MalformedJson(f"payload: not JSON ({twice.msg})", field_path(("payload", *twice.loc))) from None
        except json.JSONDecodeError as error:
            raise InputError(f"payload: not JSON ({error.msg})", "payload") from None
    return _parsed(TaskAmendmentRequest, given, ("run_at", "delay_seconds", "priority", "payload"))


def _parsed(model: type[M], form: Mapping[str, Any], fields: tuple[str, ...]) -> M:
    body: dict[str, Any] = {}
    for name in fields:
        value = form.get(name)
        if value is None or value == "":
            continue
        if name in TIME_FIELDS and isinstance(value, str):
            value = _utc(value)
        if name in NUMBER_FIELDS and isinstance(value, str):
            value = _number(name, value)
        if name in WHOLE_FIELDS and isinstance(value, str):
            value = _whole(name, value)
        body[name] = [value] if name == "status" else value
    for flag in ("all", "dry_run"):
        if flag in body:
            body[flag] = True  # a ticked box
    try:
        return model.model_validate(body)
    except ValidationError as error:
        raise input_error(error) from None


def _number(name: str, typed: str) -> float:
    try:
        return float(typed)
    except ValueError:
        raise InputError(f"{name}: must be a number, not {typed!r}", name) from None


def _whole(name: str, typed: str) -> int:
    """A whole number as typed; its range is the request model's to check (its refusal is the API's)."""
    if not re.fullmatch(r"-?[0-9]+", typed.strip()):  # int() would also take "1_0", "+1" and other digits
        raise InputError(f"{name}: must be a whole number, not {typed!r}", name)
    return int(typed)


def _utc(typed: str) -> str:
    """A datetime-local input has no zone: the console's times are UTC."""
    has_zone = typed.endswith("Z") or "+" in typed[10:] or "-" in typed[10:]
    return typed if has_zone else f"{typed}Z"


# -- pages -------------------------------------------------------------------------


def waiting_page(config: StackConfig, form: Mapping[str, str], found: BulkChange | None, carry_on: str = "") -> str:
    """The filter, what it selects and the action form; `carry_on` (carry_on_form) where an action said more."""
    return (
        f"<section><h2>Waiting tasks</h2>{_filter_form(config, form)}</section>{carry_on}"
        f"<section>{_listing(found)}{_action_form(config, form, found) if found else ''}</section>"
    )


def _filter_form(config: StackConfig, form: Mapping[str, str]) -> str:
    lambdas = _options(["", *config.lambdas], form.get("lambda", ""), blank="any lambda")
    statuses = _options(["", *sorted(s.value for s in WAITING)], form.get("status", ""), blank="any waiting state")
    ticked = " checked" if form.get("all") else ""
    return (
        '<form method="get" action="/waiting" id="waiting-filter">'
        f'<select name="lambda" aria-label="lambda">{lambdas}</select> '
        f'<input name="collection" value="{escape(form.get("collection", ""))}" placeholder="collection" '
        'aria-label="collection"> '
        f'<input name="flow_key" value="{escape(form.get("flow_key", ""))}" placeholder="flow key" '
        'aria-label="flow key"> '
        f'<select name="status" aria-label="status">{statuses}</select> '
        f"runs from {_time_input('since', form)} to {_time_input('until', form)} UTC, "
        f'the soonest <input name="limit" size="5" value="{escape(form.get("limit", ""))}" placeholder="{MAX_BULK}" '
        'aria-label="limit"> '
        f'<label><input type="checkbox" name="all" value="1"{ticked}> all (no filter)</label> '
        '<button type="submit">Filter</button></form>'
    )


def _listing(found: BulkChange | None) -> str:
    if found is None:
        return "<p>Choose a lambda, collection, flow key, state or window (or tick all) to see what it selects.</p>"
    rows = [
        [f'<td><a href="/tasks/{quote(t.id)}">{escape(t.id)}</a></td>', cell(t.lambda_name), cell(t.collection),
         cell(t.flow_key or ""), cell(t.priority), cell(t.status.value), cell(when(t.next_at))]
        for t in found.matched
    ]  # fmt: skip
    more = '<p class="muted">More match than shown: act on these, then go on with the rest.</p>' if found.more else ""
    headers = ["task", "lambda", "collection", "flow key", "priority", "state", "runs at (UTC)"]
    return (table(headers, rows, "waiting") if rows else "<p>None match.</p>") + more


def _action_form(config: StackConfig, form: Mapping[str, str], found: BulkChange) -> str:
    # The action applies to the selection shown: the filter travels in hidden fields.
    hidden = hidden_fields({name: form[name] for name in SELECTION_FIELDS if form.get(name)})
    priorities = sorted({p for spec in config.lambdas.values() for p in spec.priorities})
    return (
        f'<form method="post" action="/waiting" id="bulk">{hidden}'
        f"<p>New run time {_time_input('run_at', {})} UTC, or in "
        '<input name="delay_seconds" size="6" placeholder="seconds" aria-label="delay seconds"> s · '
        f'priority <select name="priority" aria-label="priority">{_options(["", *priorities], "", "-")}</select></p>'
        '<p>at most <input name="per_second" size="4" placeholder="all" aria-label="per second"> a second '
        '<label><input type="checkbox" name="dry_run" value="1"> dry run</label> '
        f'<button name="action" value="cancel" class="drop">Cancel these {len(found.matched)}</button> '
        '<button name="action" value="reschedule" class="pause">Reschedule</button> '
        '<button name="action" value="reprioritise" class="resume">Reprioritise</button></p></form>'
    )


def carry_on_form(form: Mapping[str, str], action: str, result: BulkChange, run_at: datetime | None) -> str:
    """Where an action answered more: a button that goes on with it after the tasks it reached (its cursor),
    with the same selection and the same action; a reschedule's `run_at` as the first call resolved it (a
    delay would count from each call's now)."""
    if not result.more or result.cursor is None:
        return ""
    carried = {name: form[name] for name in SELECTION_FIELDS + CARRIED_ON[action] if form.get(name)}
    if run_at is not None:
        carried["run_at"] = run_at.isoformat()
    carried |= {"action": action, "cursor": result.cursor}
    return (
        f'<form method="post" action="/waiting" id="carry-on">{hidden_fields(carried)}'
        f'<button type="submit">Go on: {escape(action)} the next ones</button></form>'
    )


def bulk_message(action: str, result: BulkChange) -> str:
    if result.dry_run:
        message = f"Would {action} {len(result.matched)} waiting tasks"
    else:
        message = f"{PAST[action]} {result.changed} of {len(result.matched)} waiting tasks"
        message += f"; {len(result.skipped)} were claimed meanwhile and left as they are" if result.skipped else ""
    if result.first_at and result.matched and action != "cancel":
        message += f" (to run {when(result.first_at)} to {when(result.last_at)} UTC)"
    return message + (". More match: go on below for the rest." if result.more else ".")


def change_form(task: Task, config: StackConfig) -> str:
    """The form that changes a task no executor has claimed (empty for any other)."""
    if task.status not in WAITING:
        return ""
    priorities = _options(["", *config.lambdas[task.lambda_].priorities], "", blank=f"keep {task.priority}")
    return (
        f'<section><h2>Change this waiting task</h2><form method="post" action="/tasks/{quote(task.id)}/change" '
        f'id="change"><p>Run at {_time_input("run_at", {})} UTC, or in '
        '<input name="delay_seconds" size="6" placeholder="seconds" aria-label="delay seconds"> s · '
        f'priority <select name="priority" aria-label="priority">{priorities}</select></p>'
        '<p><textarea name="payload" rows="4" cols="60" placeholder="new payload (JSON object); blank keeps it" '
        'aria-label="payload"></textarea></p><button type="submit" class="pause">Change</button>'
        '<span class="muted"> refused if an executor claims it first</span></form></section>'
    )


def _options(values: list[str], chosen: str, blank: str) -> str:
    return "".join(
        f'<option value="{escape(v)}"{" selected" if v == chosen else ""}>{escape(v or blank)}</option>' for v in values
    )


def _time_input(name: str, form: Mapping[str, str]) -> str:
    value = escape(form.get(name, "").removesuffix("Z"))
    return f'<input type="datetime-local" step="1" name="{name}" value="{value}" aria-label="{name}">'
