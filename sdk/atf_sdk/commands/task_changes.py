"""atf change ID (one waiting task) and atf bulk cancel | reschedule | reprioritise (a selection of them)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from atf_core.vocabulary import MAX_BULK
from atf_sdk.commands.support import (
    Exit,
    add_lambda,
    add_yes,
    client,
    common,
    confirmed,
    console,
    guarded,
    json_object,
    json_out,
    moment,
    progress,
    when,
)

if TYPE_CHECKING:
    from atf_core.bulk import BulkChange
    from atf_core.schema import Task
    from atf_sdk.client import AtfClient

SHOWN = 20  # rows of a selection printed as a table; --json has them all
WAITING = ("new", "enqueued", "retriable_failure")


def _change(args: argparse.Namespace) -> int:
    if (args.at, args.delay, args.priority, args.payload) == (None, None, None, None):
        from atf_core.errors import InputError

        raise InputError("nothing to change: give --at or --delay, --priority or --payload")
    with client(args) as atf:
        task = atf.change(
            args.id,
            run_at=args.at,
            delay_seconds=args.delay,
            priority=args.priority,
            payload=args.payload,
            lambda_name=args.lambda_name,
        )
    if args.json:
        json_out(task)
    else:
        _changed(task)
    return Exit.OK


def _changed(task: Task) -> None:
    console().print(f"{task.id}: {task.status.value}, priority {task.priority}, runs at {when(task.next_at)}")


def _selection(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "lambda_name": args.lambda_name,
        "collection": args.collection,
        "flow_key": args.flow_key,
        "status": args.status,
        "since": args.since,
        "until": args.until,
        "all": args.all,
        "limit": args.limit,
        "per_second": args.per_second,
        "cursor": args.cursor,
    }


def _call(atf: AtfClient, args: argparse.Namespace, dry_run: bool) -> BulkChange:
    fields = {**_selection(args), "dry_run": dry_run}
    if args.action == "cancel":
        return atf.bulk_cancel(**fields)
    if args.action == "reschedule":
        return atf.bulk_reschedule(run_at=args.at, delay_seconds=args.delay, **fields)
    return atf.bulk_reprioritise(args.priority, **fields)


def _bulk(args: argparse.Namespace) -> int:
    """A dry run first, so the question names how many it would touch (--yes and --dry-run skip asking)."""
    with client(args) as atf:
        if not (args.dry_run or args.yes):
            would = _call(atf, args, dry_run=True)
            question = f"{args.action} {_waiting(len(would.matched), would.more)}?"
            if would.matched and not confirmed(args, question):
                return Exit.FAILED
        with progress(f"{args.action}: changing", None):
            done = _call(atf, args, args.dry_run)
    if args.json:
        json_out(done)
    else:
        _summary(done, args.action)
    return Exit.OK


def _waiting(count: int, more: bool) -> str:
    """'3 waiting tasks'; '3+ waiting tasks' where the selection holds more than the limit let through."""
    return f"{count}{'+' if more else ''} waiting task{'' if count == 1 and not more else 's'}"


def _summary(done: BulkChange, verb: str) -> None:
    from rich.table import Table

    first_shown = f" (the first {SHOWN} shown)" if len(done.matched) > SHOWN else ""
    if done.dry_run:
        title = f"dry run: would {verb} {_waiting(len(done.matched), done.more)}{first_shown}"
    else:  # the rows are the tasks as they were matched: a reprioritised one still shows its old priority
        title = f"{verb}: {done.changed} of {len(done.matched)} matched changed{first_shown}; as they were before"
    table = Table("id", "lambda", "collection", "flow key", "priority", "status", "runs at", title=title)
    for task in done.matched[:SHOWN]:
        row = (task.id, task.lambda_name, task.collection, task.flow_key or "", task.priority, task.status.value)
        table.add_row(*row, when(task.next_at))
    out = console()
    out.print(table)
    if done.skipped:
        left = "would leave" if done.dry_run else "left"
        why = "they would run at or past their expire_at" if done.dry_run else "claimed meanwhile, or past expire_at"
        out.print(f"{len(done.skipped)} {left} as they were ({why}): {', '.join(done.skipped[:SHOWN])}")
    if done.matched and done.first_at and done.last_at and verb != "cancel":
        out.print(f"they run from {when(done.first_at)} to {when(done.last_at)}")
    if done.more:  # the cursor goes on where this call stopped (a reschedule: without moving any task twice)
        reached = f"more tasks match than the {len(done.matched)} this call reached"
        again = "--dry-run --cursor" if done.dry_run else "--cursor"  # a dry run's cursor goes on with a dry run
        # (a continued reschedule or reprioritise drips on with its first call's run time and rate)
        out.print(f"{reached}: run it again with {again} {done.cursor} for the rest")


def _when_options(verb: argparse.ArgumentParser, required: bool) -> None:
    at = verb.add_mutually_exclusive_group(required=required)
    at.add_argument("--at", "--run-at", dest="at", type=moment, help="the new run time (RFC 3339)")
    at.add_argument("--delay", type=float, metavar="SECONDS", help="the new run time, seconds from now")


def _add_change(verbs: Any) -> None:
    verb = verbs.add_parser(
        "change", parents=[common()], help="change the run time, priority or payload of a task not yet claimed"
    )
    verb.add_argument("id", metavar="ID")
    add_lambda(verb)
    _when_options(verb, required=False)
    verb.add_argument("--priority", help="one of the lambda's priorities")
    verb.add_argument("--payload", type=json_object, help="a JSON object that replaces the payload")
    verb.set_defaults(run=guarded(_change))


def _add_bulk(verbs: Any) -> None:
    group = verbs.add_parser("bulk", help="cancel, reschedule or reprioritise waiting tasks by filter")
    actions = group.add_subparsers(dest="action", required=True)
    for name, text in (
        ("cancel", "cancel them"),
        ("reschedule", "run them at a new time"),
        ("reprioritise", "move them to another priority's queue"),
    ):
        verb = actions.add_parser(name, parents=[common()], help=text)
        verb.add_argument("--lambda", dest="lambda_name", metavar="LAMBDA")
        verb.add_argument("--collection")
        verb.add_argument("--flow-key", help="only the tasks of this flow-control key")
        verb.add_argument("--status", action="append", choices=WAITING, help="repeat for several (default: all)")
        verb.add_argument("--since", type=moment, help="runs next at or after (RFC 3339)")
        verb.add_argument("--until", type=moment, help="runs next at or before (RFC 3339)")
        verb.add_argument("--all", action="store_true", help="needed when no filter is given: every waiting task")
        verb.add_argument("--limit", type=int, default=MAX_BULK, help=f"the soonest N (default {MAX_BULK})")
        verb.add_argument("--dry-run", action="store_true", help="list what it would touch; change nothing")
        verb.add_argument("--per-second", type=float, help="the real run's rate (see docs/api.md)")
        verb.add_argument("--cursor", help="go on where an earlier run with the same selection said more")
        add_yes(verb)  # else it asks, naming how many
        if name == "reschedule":
            _when_options(verb, required=True)
        if name == "reprioritise":
            verb.add_argument("--priority", required=True, help="one of the selected lambdas' priorities")
        verb.set_defaults(run=guarded(_bulk))


def add_task_change_commands(verbs: Any) -> None:
    _add_change(verbs)
    _add_bulk(verbs)
