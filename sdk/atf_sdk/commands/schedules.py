"""atf schedules put | list | get | delete | pause | resume."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from atf_core.vocabulary import MAX_UPCOMING
from atf_sdk.commands.support import (
    CATCH_UP,
    OVERLAP,
    add_lambda,
    client,
    common,
    console,
    guarded,
    json_file,
    json_object,
    json_out,
    when,
)

if TYPE_CHECKING:
    from atf_core.recurrence import Schedule, ScheduleSpec


def _spec(args: argparse.Namespace) -> ScheduleSpec:
    """From --file, with any option given on the command line taking precedence."""
    from atf_core.recurrence import ScheduleSpec

    fields: dict[str, Any] = dict(args.file or {})
    given = {
        "lambda": args.lambda_name,
        "cron": args.cron,
        "every_seconds": args.every,
        "payload": args.payload,
        "collection": args.collection,
        "priority": args.priority,
        "max_attempts": args.max_attempts,
        "timeout_seconds": args.timeout,
        "flow_key": args.flow_key,
        "timezone": args.timezone,
        "overlap": args.overlap,
        "catch_up": args.catch_up,
        "catch_up_limit": args.catch_up_limit,
    }
    fields.update({k: v for k, v in given.items() if v is not None})
    if args.cron is not None:
        fields.pop("every_seconds", None)
    if args.every is not None:
        fields.pop("cron", None)
    return ScheduleSpec.model_validate(fields)


def _put(args: argparse.Namespace) -> int:
    with client(args) as atf:
        schedule = atf.put_schedule(args.name, _spec(args))
    if args.json:
        json_out(schedule)
    else:
        state = "paused" if schedule.paused else f"next at {when(schedule.next_occurrence)}"
        console().print(f"schedule [bold]{schedule.name}[/] ({_cadence(schedule)}) stored, {state}")
    return 0


def _upcoming(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= count <= MAX_UPCOMING:
        raise argparse.ArgumentTypeError(f"{count} is not 0-{MAX_UPCOMING}")
    return count


def _list(args: argparse.Namespace) -> int:
    with client(args) as atf:
        schedules = atf.schedules(args.lambda_name)
    if args.json:
        json_out(schedules)
        return 0
    from rich.table import Table

    table = Table("name", "lambda", "cadence", "collection", "state", "next", "fired", "skipped")
    for s in schedules:
        state = "paused" if s.paused else "active"
        # A paused schedule keeps the occurrence it would fire next, but has none coming: "-", as `show` says.
        row = (
            s.name,
            s.spec.lambda_,
            _cadence(s),
            s.spec.collection,
            state,
            when(None if s.paused else s.next_occurrence),
        )
        table.add_row(*row, str(s.fired), str(s.skipped))
    console().print(table if schedules else "no schedules")
    return 0


def _get(args: argparse.Namespace) -> int:
    with client(args) as atf:
        view = atf.get_schedule(args.name, upcoming=args.upcoming, lambda_name=args.lambda_name)
    if args.json:
        json_out(view)
        return 0
    spec, out = view.spec, console()
    out.print(f"[bold]{view.name}[/]: {spec.lambda_}/{spec.collection}, {_cadence(view)}")
    out.print(f"overlap {spec.overlap.value}, catch-up {spec.catch_up.value} (up to {spec.catch_up_limit})")
    out.print(f"{'paused' if view.paused else 'active'}; fired {view.fired}, skipped {view.skipped}")
    out.print(f"last occurrence {when(view.last_occurrence)}, its task {view.last_task_id or '-'}")
    if view.upcoming or view.paused:  # --upcoming 0 asked for none
        out.print("next: " + (", ".join(when(m) for m in view.upcoming) or "none while paused"))
    return 0


def _change(args: argparse.Namespace) -> int:
    with client(args) as atf:
        if args.action == "delete":
            atf.delete_schedule(args.name, lambda_name=args.lambda_name)
            schedule = None
        else:
            schedule = (atf.pause_schedule if args.action == "pause" else atf.resume_schedule)(
                args.name, lambda_name=args.lambda_name
            )
    if args.json:
        json_out(schedule if schedule else {"deleted": args.name})
    else:
        done = {"delete": "deleted", "pause": "paused", "resume": "resumed"}[args.action]
        following = f", next at {when(schedule.next_occurrence)}" if schedule and not schedule.paused else ""
        console().print(f"schedule {args.name} {done}{following}")
    return 0


def _cadence(schedule: Schedule) -> str:
    spec = schedule.spec
    every = f"every {spec.every_seconds:,.10g} s" if spec.every_seconds is not None else f"cron '{spec.cron}'"
    return every if spec.timezone == "UTC" else f"{every} {spec.timezone}"


def _add_put(actions: Any) -> None:
    put = actions.add_parser("put", parents=[common()], help="create or replace a schedule")
    put.add_argument("name", metavar="NAME")
    put.add_argument("--file", type=json_file, help="the schedule as JSON (a ScheduleSpec; '-' for stdin)")
    put.add_argument("--lambda", dest="lambda_name", metavar="LAMBDA")
    cadence = put.add_mutually_exclusive_group()
    cadence.add_argument("--cron", help="cron expression, e.g. '*/5 * * * *' (a sixth field: seconds)")
    cadence.add_argument("--every", type=float, metavar="SECONDS", help="a fixed rate")
    put.add_argument("--timezone", help="for cron, e.g. Europe/Paris (default UTC)")
    put.add_argument("--payload", type=json_object, help="each task's payload, a JSON object")
    put.add_argument("--collection")
    put.add_argument("--priority")
    put.add_argument("--max-attempts", type=int)
    put.add_argument(
        "--timeout", type=float, metavar="SECONDS", help="stop an attempt running longer (default: the lambda's)"
    )
    put.add_argument("--flow-key", help="each task's flow-control key (its lambda's key_limits apply)")
    put.add_argument("--overlap", choices=OVERLAP, help="while the previous task runs")
    put.add_argument("--catch-up", choices=CATCH_UP, help="after downtime (or a pause)")
    put.add_argument(
        "--catch-up-limit",
        type=int,
        help="with --catch-up all, run at most this many due occurrences, the latest (the current one counts)",
    )
    put.set_defaults(run=guarded(_put))


def add_schedules_command(verbs: Any) -> None:
    group = verbs.add_parser("schedules", help="periodic schedules: put, list, get, delete, pause, resume")
    actions = group.add_subparsers(dest="action", required=True)
    _add_put(actions)
    listing = actions.add_parser("list", parents=[common()], help="every schedule, or a lambda's")
    listing.add_argument("--lambda", dest="lambda_name", metavar="LAMBDA")
    listing.set_defaults(run=guarded(_list))
    get = actions.add_parser("get", parents=[common()], help="a schedule and its next occurrences")
    get.add_argument("name", metavar="NAME")
    add_lambda(get)
    get.add_argument(
        "--upcoming", type=_upcoming, default=5, metavar=f"0-{MAX_UPCOMING}",
        help="how many next occurrences (default 5)",
    )  # fmt: skip
    get.set_defaults(run=guarded(_get))
    for action, text in (("delete", "delete a schedule"), ("pause", "pause it"), ("resume", "resume it")):
        verb = actions.add_parser(action, parents=[common()], help=text)
        verb.add_argument("name", metavar="NAME")
        add_lambda(verb)
        verb.set_defaults(run=guarded(_change))
