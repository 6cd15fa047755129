"""atf chains create --file chain.json | get | cancel | retry."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from atf_sdk.commands.support import (
    add_lambda,
    client,
    common,
    console,
    guarded,
    json_file,
    json_out,
    wait_seconds,
    when,
)

if TYPE_CHECKING:
    from atf_core.chains import ChainView


def _create(args: argparse.Namespace) -> int:
    with client(args) as atf:
        chain = atf.create_chain(args.file)
    if args.quiet:
        print(chain.id)
        return 0
    return _show(args, chain)


def _get(args: argparse.Namespace) -> int:
    from atf_core.chains import ChainStatus

    with client(args) as atf:
        chain = atf.get_chain(args.id, lambda_name=args.lambda_name)
        deadline = time.monotonic() + (args.wait or 0)
        while chain.status is ChainStatus.RUNNING and time.monotonic() < deadline:
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
            chain = atf.get_chain(args.id, lambda_name=args.lambda_name)
    _show(args, chain)
    if args.wait is not None and chain.status is ChainStatus.RUNNING:
        print(f"atf: chain {chain.id} still running after {args.wait:g} s", file=sys.stderr)
        return 1
    return 0


def _cancel(args: argparse.Namespace) -> int:
    with client(args) as atf:
        return _show(args, atf.cancel_chain(args.id, lambda_name=args.lambda_name))


def _retry(args: argparse.Namespace) -> int:
    with client(args) as atf:
        return _show(args, atf.retry_link(args.id, args.link, budget=args.budget, lambda_name=args.lambda_name))


def _show(args: argparse.Namespace, chain: ChainView) -> int:
    from rich.table import Table

    if args.json:
        json_out(chain)
        return 0
    title = f"chain {chain.id}: {chain.status.value} (created {when(chain.created_at)})"
    table = Table("link", "after", "status", "attempt", "task", title=title)
    for link in chain.links:
        table.add_row(link.name, ", ".join(link.after) or "-", link.status.value, str(link.attempt), link.task_id)
    console().print(table)
    return 0


def add_chains_command(verbs: Any) -> None:
    group = verbs.add_parser("chains", help="chains of tasks: create, get, cancel, retry a failed link")
    actions = group.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", parents=[common()], help="create a chain from a JSON file")
    create.add_argument(
        "--file", type=json_file, required=True, help='{"links": [{"name", "lambda", "after": [...]}], "key"}'
    )
    create.add_argument("-q", "--quiet", action="store_true", help="print only the chain's id")
    create.set_defaults(run=guarded(_create))
    for name, run, text in (("get", _get, "status and links"), ("cancel", _cancel, "cancel the links not started")):
        verb = actions.add_parser(name, parents=[common()], help=text)
        verb.add_argument("id", metavar="ID")
        add_lambda(verb)
        verb.set_defaults(run=guarded(run))
        if name == "get":
            verb.add_argument(
                "--wait", type=wait_seconds, metavar="SECONDS", help="while it runs, at most SECONDS (then exit 1)"
            )
    retry = actions.add_parser("retry", parents=[common()], help="run a failed (dead-letter) link again")
    retry.add_argument("id", metavar="ID")
    retry.add_argument("link", metavar="LINK")
    add_lambda(retry)
    retry.add_argument("--budget", type=int, help="attempts it gets (default: the lambda's max_attempts)")
    retry.set_defaults(run=guarded(_retry))
