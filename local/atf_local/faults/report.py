"""The table per scenario, printed with rich and written as Markdown."""

from __future__ import annotations

import platform
import time
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from atf_local.faults.harness import ScenarioRun

COLUMNS = (
    "#", "scenario", "tasks", "faults injected", "lost", "duplicate executions", "overlapping executions",
    "stale writes rejected", "max start-lag (s)", "drain after heal (s) / bound", "verdict",
)  # fmt: skip


def row(outcome: ScenarioRun) -> list[str]:
    r, s = outcome.result, outcome.scenario
    return [
        str(s.number), s.title, str(r.tasks), str(r.faults), str(r.lost), str(r.duplicates), str(r.overlaps),
        str(r.stale_rejected), f"{r.max_start_lag_s:.1f}", f"{r.drain_s:.1f} / {s.drain_bound_s:.0f}",
        _verdict(outcome),
    ]  # fmt: skip


def _verdict(outcome: ScenarioRun) -> str:
    r = outcome.result
    if not r.ok:
        return f"FAIL ({len(r.violations)})"
    return "ok, target missed" if r.missed_targets else "ok"


def _lags(outcome: ScenarioRun) -> str:
    return ", ".join(f"{name} {lag:.1f}" for name, lag in sorted(outcome.result.lag_by_lambda.items()))


def print_table(outcomes: Sequence[ScenarioRun], console: Console | None = None) -> None:
    table = Table(title="ATF guarantees under injected faults")
    for column in COLUMNS:
        table.add_column(column, justify="left" if column == "scenario" else "right")
    for outcome in outcomes:
        table.add_row(*row(outcome), style=None if outcome.result.ok else "bold red")
    console = console or Console(width=max(Console().width, 200))
    console.print(table)
    for outcome in outcomes:
        for violation in outcome.result.violations[:20]:
            console.print(f"[red]scenario {outcome.scenario.number}: {violation}[/red]")
        for missed in outcome.result.missed_targets:
            console.print(f"[yellow]scenario {outcome.scenario.number}: target missed: {missed}[/yellow]")


def write_markdown(outcomes: Sequence[ScenarioRun], path: Path, command: str) -> None:
    lines = [
        "# Fault-injection results",
        "",
        f"Produced by `{command}` on {time.strftime('%Y-%m-%d %H:%M:%S %Z')} "
        f"({platform.system()} {platform.machine()}, Python {platform.python_version()}).",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---" for _ in COLUMNS) + "|",
        *("| " + " | ".join(row(o)) + " |" for o in outcomes),
        "",
        "| # | executions | state writes (fenced) | reconciled after a lost response | p95 start-lag (s) "
        "| max start-lag by lambda (s) | executor exits | run time (s) |",
        "|---|---|---|---|---|---|---|---|",
        *(
            f"| {o.scenario.number} | {o.result.executions} | {o.result.writes} ({o.result.fenced_writes}) | "
            f"{o.result.reconciled} | {o.result.p95_start_lag_s:.1f} | {_lags(o)} | {o.result.executor_exits} | "
            f"{o.seconds:.0f} |"
            for o in outcomes
        ),
        "",
    ]
    for outcome in outcomes:
        for violation in outcome.result.violations:
            lines.append(f"- scenario {outcome.scenario.number}: {violation}")
        for missed in outcome.result.missed_targets:
            lines.append(f"- scenario {outcome.scenario.number}: target missed: {missed}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
