"""The console's pages: plain HTML rendered on the server, forms for every action, no script."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from html import escape
from urllib.parse import quote, urlencode

from atf_core.config import StackConfig
from atf_core.deadletters import BulkResult, DeadLetter, DeadLetterFilter
from atf_core.schema import Gate, Task, gate_scope
from atf_core.vocabulary import MAX_CHOSEN_DEAD_LETTERS, MAX_DEAD_LETTER_ACTION
from atf_local.console.data import Bucket, KeyRow
from atf_sdk.snapshot import QueueRow, Snapshot

TICKED = "tick."  # a dead letter's row box is named so, then its id: the redrive form's ticked letters
STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1d2433; background: #f6f7f9; }
header { background: #1d2433; color: #fff; padding: 10px 24px; display: flex; gap: 24px; align-items: center; }
header a { color: #cfe1ff; text-decoration: none; } header strong { font-size: 16px; }
header form { margin-left: auto; } main { padding: 16px 24px; max-width: 1200px; }
section { background: #fff; border: 1px solid #dde1e8; border-radius: 6px; padding: 12px 16px; margin-bottom: 16px; }
h2 { font-size: 15px; margin: 0 0 10px; } table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #eef0f4; vertical-align: top; }
th { font-weight: 600; color: #555; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.zero { color: #bbb; } .muted { color: #777; } .flash { background: #e8f4ea; border-color: #9cc9a4; }
.error { background: #fbeaea; border-color: #e3a5a5; } form.inline { display: inline; margin: 0; }
button { font: inherit; padding: 2px 10px; border: 1px solid #99a; border-radius: 4px; background: #fff; }
button { cursor: pointer; }
button.pause { border-color: #c98a00; } button.drop { border-color: #b33; } button.resume { border-color: #2a7d3a; }
input, select { font: inherit; padding: 2px 4px; } .bar { background: #4a78c2; height: 14px; display: inline-block; }
.hist td { padding: 2px 8px; border: 0; white-space: nowrap; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(360px, 1fr)); gap: 12px; }
pre { background: #f3f4f7; padding: 8px; overflow-x: auto; margin: 0; }
"""


def page(title: str, body: str, config: StackConfig, message: str = "", error: bool = False) -> str:
    kind = "error" if error else "flash"
    flash = f'<section class="{kind}" id="message">{escape(message)}</section>' if message else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)} · ATF console</title>
<style>{STYLE}</style></head>
<body><header><strong>ATF console</strong><span class="muted">{escape(config.name)}</span>
<a href="/">Overview</a><a href="/waiting">Waiting tasks</a><a href="/dead-letters">Dead letters</a>
<form action="/tasks" method="get"><input name="id" placeholder="task id" size="34" aria-label="task id">
<button type="submit">Find task</button></form></header>
<main>{flash}{body}</main></body></html>"""


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], id_: str = "") -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(rows_cell for rows_cell in row) + "</tr>" for row in rows)
    return f"<table{f' id={id_!r}' if id_ else ''}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def cell(value: object) -> str:
    return f"<td>{escape(str(value))}</td>"


def number(value: float | int | None, digits: int = 0) -> str:
    if value is None:
        return '<td class="n muted">-</td>'
    text = f"{value:.{digits}f}" if digits else f"{round(value):d}"
    return f'<td class="n{" zero" if not value else ""}">{text}</td>'


def when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if moment else "-"


# -- overview ----------------------------------------------------------------------


def overview(
    snapshot: Snapshot, histograms: dict[str, tuple[list[Bucket], float | None, int]], keys: list[KeyRow]
) -> str:
    return "".join([tasks_section(snapshot), keys_section(keys), gates_section(snapshot), lag_section(histograms)])


def keys_section(keys: list[KeyRow]) -> str:
    """The busiest flow-control keys; each links to its waiting tasks, to act on them."""
    if not keys:
        return ""
    rows = [
        [cell(k.lambda_name), f'<td><a href="{escape(_waiting_of(k))}">{escape(k.flow_key)}</a></td>',
         number(k.waiting), number(k.running), number(k.finished_per_min)]
        for k in keys
    ]  # fmt: skip
    headers = ["lambda", "flow key", "waiting", "running", "finished/min"]
    return f"<section><h2>Busiest flow keys</h2>{table(headers, rows, 'keys')}</section>"


def tasks_section(snapshot: Snapshot) -> str:
    columns = snapshot.columns()
    headers = ["lambda", "priority", *(c.replace("_", " ") for c in columns), "finished/min", "lag p95 (ms)"]
    rows = [_task_row(row, columns) for row in snapshot.rows]
    dead = ", ".join(f"{name}: {count}" for name, count in (snapshot.dead_letters or {}).items())
    notes = "".join(f'<p class="muted">{escape(n)}</p>' for n in snapshot.notes)
    return (
        f"<section><h2>Tasks by state, per lambda and priority</h2>{table(headers, rows, 'tasks')}"
        f'<p>Dead letters: <a href="/dead-letters">{escape(dead or "none")}</a></p>{notes}'
        f'<p class="muted">As of {when(snapshot.as_of)} UTC · <a href="/?refresh=5">refresh every 5 s</a></p></section>'
    )


def _task_row(row: QueueRow, columns: list[str]) -> list[str]:
    counts = [number(row.counts.get(c, 0)) for c in columns]
    return [cell(row.lambda_), cell(row.priority), *counts, number(row.finished_per_min), number(row.lag_p95_ms)]


def _waiting_of(key: KeyRow) -> str:
    return back_to("/waiting", **{"lambda": key.lambda_name, "flow_key": key.flow_key})


def gate_button(action: str, lambda_name: str, collection: str | None, label: str = "") -> str:
    fields = (
        f'<input type="hidden" name="action" value="{action}">'
        f'<input type="hidden" name="lambda" value="{escape(lambda_name)}">'
    )
    if collection:
        fields += f'<input type="hidden" name="collection" value="{escape(collection)}">'
    name = label or action.capitalize()
    target = gate_scope(lambda_name, collection)
    return (
        f'<form class="inline" method="post" action="/gates">{fields}'
        f'<button type="submit" class="{action}" data-gate="{escape(target)}">{escape(name)}</button></form>'
    )


def gates_section(snapshot: Snapshot) -> str:
    lambdas = sorted({row.lambda_ for row in snapshot.rows})
    in_force = {(g.lambda_, g.collection): g for g in snapshot.gates}
    rows = [_gate_row(g) for g in snapshot.gates]
    quick = [
        [cell(name), cell(_state(in_force.get((name, None)))),
         "<td>" + " ".join(gate_button(a, name, None) for a in ("pause", "drop", "resume")) + "</td>"]
        for name in lambdas
    ]  # fmt: skip
    options = "".join(f"<option>{escape(n)}</option>" for n in lambdas)
    form = (
        '<form method="post" action="/gates" id="gate-form">Gate a collection: '
        f'<select name="lambda" aria-label="lambda">{options}</select> '
        '<input name="collection" placeholder="collection" required aria-label="collection"> '
        '<input name="reason" placeholder="reason (optional)" aria-label="reason"> '
        '<button name="action" value="pause" class="pause">Pause</button> '
        '<button name="action" value="drop" class="drop">Drop</button> '
        '<button name="action" value="resume" class="resume">Resume</button></form>'
    )
    listed = table(["scope", "action", "since", "until", "reason", ""], rows) if rows else "<p>No gates.</p>"
    gates = f'<div id="gates">{listed}</div>'
    return (
        f"<section><h2>Gates</h2>{table(['lambda', 'gate', ''], quick, 'lambda-gates')}"
        f"<h2 style='margin-top:14px'>In force</h2>{gates}<p>{form}</p></section>"
    )


def _state(gate: Gate | None) -> str:
    return "open" if gate is None else {"pause": "paused", "drop": "dropping"}[gate.action.value]


def _gate_row(gate: Gate) -> list[str]:
    return [
        cell(gate.scope), cell(gate.action.value), cell(when(gate.created_at)), cell(when(gate.until)),
        cell(gate.reason), "<td>" + gate_button("resume", gate.lambda_, gate.collection) + "</td>",
    ]  # fmt: skip


def lag_section(histograms: dict[str, tuple[list[Bucket], float | None, int]]) -> str:
    parts = []
    for name, (buckets, p95, count) in histograms.items():
        top = max((b.count for b in buckets), default=0) or 1
        rows = "".join(
            f'<tr><td>{escape(b.label)}</td><td><span class="bar" style="width:{int(220 * b.count / top)}px">'
            f'</span></td><td class="n">{b.count}</td></tr>'
            for b in buckets
        )
        summary = f"{count} started" + (f", p95 {p95:.0f} ms" if p95 is not None else "")
        parts.append(
            f'<div><h2>{escape(name)}</h2><p class="muted">{summary}</p>'
            f'<table class="hist" id="lag-{escape(name)}">{rows}</table></div>'
        )
    title = "Start lag: first claim time minus scheduled time"
    return f'<section><h2>{title}</h2><div class="grid">{"".join(parts)}</div></section>'


# -- one task ----------------------------------------------------------------------


def task_page(task: Task) -> str:
    facts = [
        ("status", task.status.value), ("lambda", task.lambda_), ("priority", task.priority),
        ("collection", task.collection), ("attempt", f"{task.attempt} of {task.max_attempts}"),
        ("scheduled", when(task.scheduled_at)), ("created", when(task.created_at)),
        ("enqueued", when(task.enqueued_at)), ("claimed", when(task.claimed_at)),
        ("last heartbeat", when(task.heartbeat_at)), ("finished", when(task.finished_at)),
        ("reason", task.reason or "-"), ("chain", task.chain or "-"), ("key", task.key or "-"),
    ]  # fmt: skip
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in facts)
    errors = [
        [cell(e.attempt), cell(when(e.at)), cell(e.type), cell(e.message), cell(e.host or "-")]
        for e in task.error_history()
    ]
    headers = ["attempt", "at", "error", "message", "host"]
    history = table(headers, errors, "errors") if errors else "<p>No failed attempts.</p>"
    payload = escape(json.dumps(task.payload, indent=2))
    return (
        f'<section><h2>Task <code id="task-id">{escape(task.id)}</code></h2><table id="task">{rows}</table></section>'
        f"<section><h2>History: errors per attempt</h2>{history}</section>"
        f"<section><h2>Payload</h2><pre>{payload}</pre></section>"
    )


# -- dead letters ------------------------------------------------------------------


def dead_letters_page(
    config: StackConfig,
    form: Mapping[str, str],
    chosen: DeadLetterFilter | None,
    letters: list[DeadLetter],
    after: str | None = None,
    carry_on: str = "",
    held: tuple[int, bool] | None = None,
) -> str:
    """The filter as typed; what it selects and its redrive form only if it was taken (`chosen`), and the
    last redrive's carry-on form (`redrive_carry_on`) if it reached only part of the selection. The letters
    listed are the oldest of the selection, or those past `after` (where a Go on went on): the redrive form
    acts on these, carrying the same `after`. `held`: how many the whole selection holds (and whether more)."""
    filters = f"<section><h2>Dead letters</h2>{_dead_letter_filter(config, form)}</section>"
    if chosen is None:
        return filters
    rows = [
        [_tick(d, f"{TICKED}{d.id}" in form), f'<td><a href="/tasks/{quote(d.id)}">{escape(d.id)}</a></td>',
         cell(d.collection), cell(d.priority), cell(d.error_type or "-"), cell(when(d.died_at))]
        for d in letters
    ]  # fmt: skip
    headers = ["", "task", "collection", "priority", "error", "died"]
    listing = table(headers, rows, "dead-letters") if rows else "<p>None match.</p>"
    if held is not None and rows:
        count, more = held
        holds = f"{count:,} or more" if more else f"{count:,}"
        listing = f'<p id="held">{len(rows)} listed; the selection holds {holds}.</p>{listing}'
    as_of = (
        f'<p class="muted">Dead by {when(chosen.until)} UTC, when the selection was listed: a redrive and its Go on '
        "take these, not letters that die again once redriven. Filter to list afresh.</p>"
        if chosen.until
        else ""
    )
    return f"{filters}<section>{listing}{as_of}<p>{_redrive_form(chosen, letters, after)}</p>{carry_on}</section>"


def _tick(dead: DeadLetter, ticked: bool) -> str:
    """A row's box, of the redrive form (which sits below the table): ticked, its letter is one of those the
    form's "Redrive the ticked" takes. A page shown again after a refusal keeps the boxes as they were."""
    task_id = escape(dead.id)
    box = f'type="checkbox" name="{TICKED}{task_id}" value="1" form="redrive" aria-label="tick {task_id}"'
    return f"<td><input {box}{' checked' if ticked else ''}></td>"


def _dead_letter_filter(config: StackConfig, form: Mapping[str, str]) -> str:
    typed = form.get("lambda", "")
    # A lambda the stack has not is not shown as another one chosen: the select says to choose one.
    unknown = "" if typed in config.lambdas else '<option value="" selected>choose a lambda</option>'
    options = unknown + "".join(
        f"<option{' selected' if n == typed else ''}>{escape(n)}</option>" for n in config.lambdas
    )
    collection, error_type = escape(form.get("collection", "")), escape(form.get("error_type", ""))
    limit = escape(form.get("limit", ""))
    return (
        f'<form method="get" action="/dead-letters" id="filter"><select name="lambda" aria-label="lambda">'
        f"{options}</select> "
        f'<input name="collection" value="{collection}" placeholder="collection" aria-label="collection"> '
        f'<input name="error_type" value="{error_type}" placeholder="error class" aria-label="error class"> '
        f'the oldest <input name="limit" size="5" value="{limit}" placeholder="{MAX_DEAD_LETTER_ACTION}" '
        'aria-label="limit"> <button type="submit">Filter</button></form>'
    )


def _selection(chosen: DeadLetterFilter) -> dict[str, str]:
    """The filter, as checked, that a redrive form carries in hidden fields: it acts on the selection shown."""
    fields = {"lambda": chosen.lambda_name, "collection": chosen.collection, "error_type": chosen.error_type}
    until = {"until": chosen.until.isoformat()} if chosen.until else {}
    return {name: value for name, value in fields.items() if value} | {"limit": str(chosen.limit)} | until


def hidden_fields(fields: Mapping[str, str]) -> str:
    """The fields a form carries unseen: the selection it acts on, where it goes on from."""
    return "".join(f'<input type="hidden" name="{name}" value="{escape(value)}">' for name, value in fields.items())


def _redrive_form(chosen: DeadLetterFilter, letters: list[DeadLetter], after: str | None) -> str:
    carried = _selection(chosen) | ({"after": after} if after else {})
    return (
        f'<form method="post" action="/dead-letters/redrive" id="redrive">{hidden_fields(carried)}'
        'at most <input name="per_second" size="4" placeholder="all" aria-label="per second"> a second '
        '<label><input type="checkbox" name="dry_run" value="1"> dry run</label> '
        f'<button type="submit" class="resume">Redrive these {len(letters)}</button> '
        f'<button type="submit" name="which" value="ticked">Redrive the ticked (at most {MAX_CHOSEN_DEAD_LETTERS})'
        "</button></form>"
    )


def redrive_message(result: BulkResult) -> str:
    verb = "would redrive" if result.dry_run else "redrove"
    count = len(result.matched) if result.dry_run else result.changed
    span = f", starting from {when(result.first_at)} to {when(result.last_at)} UTC" if result.first_at and count else ""
    busy = f" {len(result.key_busy)} left: another task holds their singleton flow key." if result.key_busy else ""
    reached = f"the oldest {len(result.matched)}" if result.more else str(len(result.matched))  # the call's limit
    message = f"{verb.capitalize()} {count} of {reached} matching dead letters{span}.{busy}"
    return message + _more_dead(result)


def _more_dead(result: BulkResult) -> str:
    """What the call did not reach: a call takes the oldest `limit` of a selection, the rest stay dead."""
    if not result.more:
        return ""
    if result.dry_run:
        return " More of the selection are dead than this dry run reached: Go on takes the next ones."
    said = " More of the selection are dead than this redrive reached: Go on takes the next ones."
    if result.changed and result.first_at and result.last_at and result.last_at > result.first_at:  # a drip
        said += (
            f" Another redrive before {when(result.last_at)} UTC, Go on's too, starts its own drip beside this"
            " one: twice the rate."
        )
    return said


def redrive_carry_on(chosen: DeadLetterFilter, form: Mapping[str, str], result: BulkResult) -> str:
    """Where a redrive reached only part of its selection: a button that goes on past the letters it reached
    (its `next`, as the API's `after`), with the same selection, rate and dry run. Redriving again from the
    oldest would take again the letters this one left dead (another task held their singleton flow key), and a
    dry run again would list the same ones."""
    if not result.more or result.next is None:
        return ""
    carried = _selection(chosen) | {name: form[name] for name in ("per_second", "dry_run") if form.get(name)}
    carried["after"] = result.next
    if result.until is not None:  # the letters dead by the first call: not those it redrove that died again
        carried["until"] = result.until.isoformat()
    what = "list the next ones (dry run)" if result.dry_run else "redrive the next ones"
    return (
        f'<form method="post" action="/dead-letters/redrive" id="carry-on">{hidden_fields(carried)}'
        f'<button type="submit">Go on: {what}</button></form>'
    )


def back_to(path: str, **params: str) -> str:
    given = {k: v for k, v in params.items() if v}
    return f"{path}?{urlencode(given)}" if given else path
