"""atf chains create --file chain.json | get | cancel | retry."""

from __future__ import annotations

import argparse
from typing import Any

from atf_core.chains import ChainSpec, ChainView
from atf_sdk.commands.support import client, common, console, guarded, json_file, json_out, when


def _create(args: argparse.Namespace) -> int:
    spec = ChainSpec.model_validate(args.file)
    with client(args) as atf:
        return _show(args, atf.create_chain(spec))


def _get(args: argparse.Namespace) -> int:
    with client(args) as atf:
        return _show(args, atf.get_chain(args.id))


def _cancel(args: argparse.Namespace) -> int:
    with client(args) as atf:
        return _show(args, atf.cancel_chain(args.id))


def _retry(args: argparse.Namespace) -> int:
    with client(args) as atf:
        return _show(args, atf.retry_link(args.id, args.link, budget=args.budget))


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
    create.set_defaults(run=guarded(_create))
    for name, run, text in (("get", _get, "status and links"), ("cancel", _cancel, "cancel the links not started")):
        verb = actions.add_parser(name, parents=[common()], help=text)
        verb.add_argument("id", metavar="ID")
        verb.set_defaults(run=guarded(run))
    retry = actions.add_parser("retry", parents=[common()], help="run a failed (dead-letter) link again")
    retry.add_argument("id", metavar="ID")
    retry.add_argument("link", metavar="LINK")
    retry.add_argument("--budget", type=int, help="attempts it gets (default: the lambda's max_attempts)")
    retry.set_defaults(run=guarded(_retry))
