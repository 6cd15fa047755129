"""atf dead-letters list | redrive | discard LAMBDA, with filters."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from atf_core.vocabulary import MAX_DEAD_LETTER_ACTION
from atf_sdk.commands.support import (
    Exit,
    add_yes,
    client,
    common,
    confirmed,
    console,
    guarded,
    json_out,
    moment,
    progress,
    when,
)

if TYPE_CHECKING:
    from atf_core.deadletters import BulkResult, DeadLetter
    from atf_sdk.client import AtfClient

SHOWN = 20  # rows of a selection printed as a table; --json has them all


def _filters(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "collection": args.collection,
        "error_type": args.error_type,
        "since": args.since,
        "until": args.until,
        "limit": args.limit,
        "after": args.after,
    }


def _chosen(args: argparse.Namespace) -> dict[str, Any]:
    """A redrive's or discard's selection: the filters, or the dead letters named by --id."""
    return {**_filters(args), "ids": args.ids}


def _list(args: argparse.Namespace) -> int:
    with client(args) as atf:
        page = atf.dead_letter_page(args.lambda_name, **_filters(args))
    if args.json:
        json_out(page)
        return 0
    letters, out = page.dead_letters, console()
    _table(letters, f"{len(letters)} dead letters of {args.lambda_name}" + (", more follow" if page.next else ""))
    if page.next:
        out.print(f"the next page: atf dead-letters list {args.lambda_name} ... --after {page.next}")
    elif args.after:
        out.print("the last page of the selection")
    if letters:
        out.print("each task's errors, attempt by attempt: atf status ID")
    return 0


def _go_ahead(args: argparse.Namespace, atf: AtfClient, verb: str) -> bool:
    """A dry run first, so the question names how many it would touch (--yes and --dry-run skip asking)."""
    if args.dry_run or args.yes:
        return True
    dry_run = atf.redrive if verb == "redrive" else atf.discard
    would = dry_run(args.lambda_name, **_chosen(args), dry_run=True)
    if not would.matched:
        return True  # nothing to ask about: the real call reports the same empty selection
    return confirmed(args, f"{verb} {len(would.matched)} dead letters of {args.lambda_name}?")


def _redrive(args: argparse.Namespace) -> int:
    with client(args) as atf:
        if not _go_ahead(args, atf, "redrive"):
            return Exit.FAILED
        with progress("redriving", None):
            done = atf.redrive(
                args.lambda_name, **_chosen(args), dry_run=args.dry_run, per_second=args.per_second, budget=args.budget
            )
    if args.json:
        json_out(done)
        return 0
    _summary(done, "redrive", "redriven", went_on=args.after is not None)
    if (done.changed or done.dry_run) and done.matched and done.first_at and done.last_at:
        console().print(f"they start from {when(done.first_at)} to {when(done.last_at)}")
    return 0


def _discard(args: argparse.Namespace) -> int:
    with client(args) as atf:
        if not _go_ahead(args, atf, "discard"):
            return Exit.FAILED
        with progress("discarding", None):
            done = atf.discard(args.lambda_name, **_chosen(args), dry_run=args.dry_run)
    if args.json:
        json_out(done)
    else:
        _summary(done, "discard", "discarded (now fatal_failure)", went_on=args.after is not None)
    return 0


def _summary(done: BulkResult, verb: str, past: str, went_on: bool = False) -> None:
    """What a redrive or discard matched and did, and how to go on where more are dead than its limit (or, where
    it went on past an earlier call's letters, that this was the last of them)."""
    shown = done.matched[:SHOWN]
    more = f" (the first {SHOWN} shown)" if len(done.matched) > SHOWN else ""
    if done.dry_run:
        title = f"dry run: would {verb} {len(done.matched)} dead letters{more}"
    else:
        title = f"{done.changed} of {len(done.matched)} matched {past}{more}"
    _table(shown, title)
    if done.more:
        console().print(_more(done, verb, past))
    elif went_on:
        console().print("the last of the selection: no more are dead past --after")
    if done.key_busy:
        left = "would stay dead" if done.dry_run else "left dead"
        console().print(f"{len(done.key_busy)} {left}, another task holding their singleton flow key: {_ids(done)}")


def _more(done: BulkResult, verb: str, past: str) -> str:
    """How to go on past the letters this call reached (calling again would take first the letters it left
    dead, and a dry run would list the same), through the letters dead by the first call (the result's until:
    a redriven letter that dies again does so past any --after)."""
    until = f" --until {when(done.until, 'milliseconds')}" if done.until else ""
    past_these = f"--after {done.next}{until}"
    if done.dry_run:
        return f"more of the selection are dead than --limit: the next ones, {past_these}"
    if not done.changed:
        done_word = past.split(" ")[0]  # redriven, discarded
        return f"more are dead, but none of these could be {done_word}: {verb} with {past_these} to go on past them"
    skipped = f" (it skips the {len(done.key_busy)} left dead)" if done.key_busy else ""
    return f"more of the selection are dead than --limit: the rest, {verb} with {past_these}{skipped}"


def _ids(done: BulkResult) -> str:
    more = f" and {len(done.key_busy) - SHOWN} more" if len(done.key_busy) > SHOWN else ""
    return ", ".join(done.key_busy[:SHOWN]) + more


def _table(letters: list[DeadLetter], title: str) -> None:
    from rich.table import Table

    table = Table("id", "collection", "priority", "error", "died", title=title)
    for dead in letters:
        table.add_row(dead.id, dead.collection, dead.priority, dead.error_type or "-", when(dead.died_at))
    console().print(table)


def add_dead_letters_command(verbs: Any) -> None:
    group = verbs.add_parser("dead-letters", help="list, redrive or discard tasks that failed for good")
    actions = group.add_subparsers(dest="action", required=True)
    for name, run, text, limit in (
        ("list", _list, "a lambda's dead letters, oldest first", 100),
        ("redrive", _redrive, "send them back to new with a fresh attempt budget", MAX_DEAD_LETTER_ACTION),
        ("discard", _discard, "end them as fatal_failure", MAX_DEAD_LETTER_ACTION),
    ):
        verb = actions.add_parser(name, parents=[common()], help=text)
        verb.add_argument("lambda_name", metavar="LAMBDA")
        verb.add_argument("--collection")
        verb.add_argument("--error-type", help="the exception class, e.g. TimeoutError")
        verb.add_argument("--since", type=moment, help="died at or after (RFC 3339)")
        verb.add_argument("--until", type=moment, help="died at or before (RFC 3339)")
        verb.add_argument("--limit", type=int, default=limit, help=f"the oldest N (default {limit})")
        verb.add_argument("--after", metavar="NEXT", help="go on past an earlier call's `next` (the same filters)")
        if name != "list":
            verb.add_argument(
                "--id", dest="ids", action="append", metavar="ID",
                help="this dead letter (repeat for each, at most 100): instead of the filters",
            )  # fmt: skip
            verb.add_argument("--dry-run", action="store_true", help="say how many and which; change nothing")
            add_yes(verb)  # else it asks, naming how many
        if name == "redrive":
            verb.add_argument("--per-second", type=float, help="drip rate: start at most this many a second")
            verb.add_argument("--budget", type=int, help="attempts each gets (default: the lambda's max_attempts)")
        verb.set_defaults(run=guarded(run))
