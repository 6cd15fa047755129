"""atf top: a live view of a stack, refreshed in place until q or Ctrl-C.

    atf top --api-url https://...execute-api... --config stack.json [--cloudwatch]
    atf top --console-url http://127.0.0.1:8081          (the local stack, exact)

Per lambda and priority: tasks by state, finished per minute, start-lag p95;
then the gates in force and the dead letters. Where the numbers come from,
and what each source can and cannot know, is atf_sdk.snapshot's docstring.
"""

from __future__ import annotations

import argparse
import io
import os
import select
import signal
import sys
import termios
import tty
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from atf_core.config import StackConfig
from atf_sdk.commands.support import console as table_console
from atf_sdk.commands.support import guarded, usage
from atf_sdk.commands.top import add_top_command as add_top_command  # still this module's, as docs/ says
from atf_sdk.extras import needs_extra

try:
    from rich.console import Console, Group, RenderableType
    from rich.live import Live
    from rich.table import Table
    from rich.text import Text
except ModuleNotFoundError as missing:  # atf-sdk installed without its cli extra
    raise needs_extra(missing, "atf top") from None
from atf_sdk.snapshot import ApiSource, CloudWatchRates, ConsoleSource, Snapshot, Source

QUIT_KEYS = frozenset("qQ")
STYLE = {"success": "green", "dead_letter": "bold red", "fatal_failure": "red", "retriable_failure": "yellow"}


# -- rendering ---------------------------------------------------------------------


def render(snapshot: Snapshot, error: str | None = None, live: bool = True) -> RenderableType:
    """One frame (of the live view, which says how to quit it, or the one --once prints)."""
    title = Text.assemble(("atf top", "bold"), f"  {snapshot.source}  ", (f"{snapshot.as_of:%H:%M:%S} UTC", "dim"))
    parts: list[RenderableType] = [title, _tasks(snapshot), _gates(snapshot), _dead_letters(snapshot)]
    parts += [Text(note, style="dim") for note in snapshot.notes]
    if error:
        parts.append(Text(f"refresh failed: {error}", style="bold red"))
    if live:
        parts.append(Text("q or Ctrl-C quits", style="dim"))
    return Group(*parts)


def _tasks(snapshot: Snapshot) -> Table:
    columns = snapshot.columns()
    table = Table(title="tasks by state", title_justify="left", expand=False)
    table.add_column("lambda")
    table.add_column("priority")
    for column in columns:
        table.add_column(column.replace("_", " "), justify="right", style=STYLE.get(column))
    table.add_column("finished/min", justify="right")
    table.add_column("lag p95", justify="right")
    for row in snapshot.rows:
        counts = [str(row.counts.get(c, 0)) for c in columns]
        table.add_row(row.lambda_, row.priority, *counts, _number(row.finished_per_min), _ms(row.lag_p95_ms))
    return table


def _gates(snapshot: Snapshot) -> RenderableType:
    if not snapshot.gates:
        return Text("gates: none", style="dim")
    table = Table(title="gates", title_justify="left")
    for column in ("scope", "action", "until", "reason"):
        table.add_column(column)
    for gate in snapshot.gates:
        until = f"{gate.until:%Y-%m-%d %H:%M:%S}" if gate.until else "-"
        table.add_row(gate.scope, Text(gate.action.value, style="yellow"), until, gate.reason)
    return table


def _dead_letters(snapshot: Snapshot) -> Text:
    if snapshot.dead_letters is None:
        return Text("dead letters: unknown", style="dim")
    counts = [(name, n) for name, n in snapshot.dead_letters.items()]
    text = Text("dead letters: ")
    for i, (name, n) in enumerate(counts):
        text.append(f"{'  ' if i else ''}{name} ")
        text.append(str(n), style="bold red" if n else "dim")
    return text


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"


def render_text(snapshot: Snapshot, width: int = 120, live: bool = True) -> str:
    """One frame as plain text, without colour, as a test or a log reads it (--once prints `render` itself)."""
    out = io.StringIO()
    Console(file=out, width=width, color_system=None, force_terminal=False).print(render(snapshot, live=live))
    return out.getvalue()


# -- the live loop -----------------------------------------------------------------


@contextmanager
def keypresses(stream: Any) -> Iterator[Any]:
    """The terminal in cbreak mode (keys arrive unbuffered; Ctrl-C still interrupts) while the block runs."""
    if not stream.isatty():
        yield None
        return
    fd = stream.fileno()
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)
    # Someone at the terminal pressed Ctrl-C to quit: honour it even when top was started with SIGINT ignored
    # (Python then installs no handler: a parent that ran it in the background of a non-interactive shell).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield fd
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def quit_pressed(fd: int | None, wait_s: float) -> bool:
    """Wait up to wait_s for a key; True if it was q, or if the terminal is gone."""
    if fd is None:
        select.select([], [], [], wait_s)
        return False
    ready, _, _ = select.select([fd], [], [], wait_s)
    if not ready:
        return False
    try:
        keys = os.read(fd, 32)
    except OSError:  # the terminal hung up
        return True
    return not keys or keys.decode(errors="ignore")[:1] in QUIT_KEYS


def run_live(source: Source, interval_s: float, console: Console | None = None) -> int:
    console = console or Console()
    snapshot = source.snapshot()
    try:
        with keypresses(sys.stdin) as fd, Live(render(snapshot), console=console, auto_refresh=False) as view:
            while not quit_pressed(fd, interval_s):
                error = None
                try:
                    snapshot = source.snapshot()
                except Exception as failed:  # noqa: BLE001 - keep the last frame and say why it is stale
                    error = f"{type(failed).__name__}: {failed}"
                view.update(render(snapshot, error), refresh=True)
    except KeyboardInterrupt:
        pass
    return 0


# -- the command -------------------------------------------------------------------


def run_top(args: argparse.Namespace) -> int:
    source = _source(args)
    if getattr(args, "json", False):  # what a frame shows, for a script: Snapshot.model_validate_json reads it back
        print(source.snapshot().model_dump_json(by_alias=True))
        return 0
    if args.once:  # to a pipe or a file, rows are kept whole, as every atf table is
        table_console().print(render(source.snapshot(), live=False))
        return 0
    return run_live(source, args.interval)


def _source(args: argparse.Namespace) -> Source:
    if args.console_url:
        return ConsoleSource(args.console_url)
    from atf_sdk.client import API_URL_ENV, AtfClient

    endpoint = getattr(args, "api_url", None) or os.environ.get(API_URL_ENV)
    if not endpoint:
        usage(f"atf top: set {API_URL_ENV}, or pass --api-url or --console-url")
    client = AtfClient(endpoint, region=getattr(args, "region", None))
    rates = None
    if args.cloudwatch:
        import boto3

        # The environment's own metrics: each deployed environment emits into a namespace of its name.
        namespace = _stack(
            args.config, "--cloudwatch reads an environment's own metrics: name its stack (--config)"
        ).metrics_namespace
        rates = CloudWatchRates(boto3.client("cloudwatch", region_name=client.region), namespace=namespace)
    return ApiSource(
        client,
        args.lambdas
        or list(_stack(args.config, "name the lambdas (--lambda NAME, repeatable) or the stack (--config)").lambdas),
        rates,
    )


def _stack(config_path: str | None, why: str) -> StackConfig:
    from pathlib import Path

    from atf_sdk.commands.stack_file import stack_config

    config = stack_config(Path(config_path) if config_path else None, "top")
    return config if config is not None else usage(f"atf top: {why}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="atf")
    # This module is __main__ here: run its own run_top rather than have the verb import a second copy
    add_top_command(parser.add_subparsers(dest="verb", required=True)).set_defaults(run=guarded(run_top))
    args = parser.parse_args(["top", *(sys.argv[1:] if argv is None else argv)])
    sys.exit(args.run(args))


if __name__ == "__main__":
    main()
