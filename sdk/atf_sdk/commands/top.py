"""atf top's options; the view itself (rich, the snapshot's models, the client) is atf_sdk.top, imported only
when the verb runs, so the CLI's other commands do not load it to build their parser."""

from __future__ import annotations

import argparse
from typing import Any

from atf_sdk.commands.stack_file import CONFIG_HELP
from atf_sdk.commands.support import guarded


def add_top_command(subparsers: Any) -> argparse.ArgumentParser:
    """`atf top`, for the CLI's build_parser (and `python -m atf_sdk.top`)."""
    top = subparsers.add_parser("top", help="a live view: tasks by state, rates, start lag, gates, dead letters")
    top.add_argument("--api-url", default=argparse.SUPPRESS, help="the API's URL (default: $ATF_API_URL)")
    top.add_argument(  # unset unless given, so `atf --api-url URL top` keeps the URL given before the verb
        "--region",
        default=argparse.SUPPRESS,
        help="region to sign for (default: from the URL or boto3's configuration)",
    )
    top.add_argument("--console-url", help="the local stack's console instead of the API, e.g. http://127.0.0.1:8081")
    top.add_argument("--config", help=f"{CONFIG_HELP}: the lambdas to show, and --cloudwatch's namespace")
    top.add_argument("--lambda", dest="lambdas", action="append", help="show this lambda (repeatable)")
    top.add_argument("--cloudwatch", action="store_true", help="finished/min and lag p95 from CloudWatch metrics")
    top.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes")
    top.add_argument("--once", action="store_true", help="print one frame and exit")
    top.add_argument(  # unset unless given, so `atf --json top` keeps the --json given before the verb
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print one snapshot as JSON and exit (atf_sdk.snapshot.Snapshot)",
    )
    top.set_defaults(run=guarded(_run_top))
    return top  # type: ignore[no-any-return]


def _run_top(args: argparse.Namespace) -> int:
    from atf_sdk.top import run_top

    return run_top(args)
