"""python -m atf_local.faults run [--scenario N ...] [--ci] [--soak-minutes M] [--out FILE]
python -m atf_local.faults check RUN_DIR ...   (judge kept runs again, from their histories)"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console

from atf_local.environment import REPO
from atf_local.faults.checker import Bounds
from atf_local.faults.harness import ScenarioRun, judge, run_scenario
from atf_local.faults.report import print_table, write_markdown
from atf_local.faults.scenarios import BUILDERS, CI_SUBSET, soak
from atf_local.faults.spec import Scenario

DEFAULT_OUT = REPO / "local" / "atf_local" / "faults" / "results.md"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # A SIGTERM must unwind like Ctrl-C, so every run's processes are stopped on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    console = Console(width=max(Console().width, 200))
    checking = args.command == "check"
    outcomes = [_recheck(run_dir) for run_dir in args.run_dirs] if checking else _run(args, console)
    print_table(outcomes, console)
    out = args.out or (None if checking or args.ci or args.scenario else DEFAULT_OUT)
    if out is not None:
        write_markdown(outcomes, out, "python -m atf_local.faults " + " ".join(sys.argv[1:] if argv is None else argv))
        console.print(f"written to {out}")
    return 0 if all(o.result.ok for o in outcomes) else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m atf_local.faults", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run scenarios, check their histories, print and write the table")
    run.add_argument("--scenario", type=int, action="append", choices=sorted(BUILDERS), help="repeatable")
    run.add_argument("--ci", action="store_true", help="the CI-sized subset (smaller workloads, no soak)")
    run.add_argument("--soak-minutes", type=float, default=10.0)
    run.add_argument("--seed", type=int, default=1)
    run.add_argument("--out", type=Path, help=f"the Markdown table (default: {DEFAULT_OUT.relative_to(REPO)})")
    run.add_argument("--runs", type=Path, help="where run directories (histories, logs) go (default: a temp dir)")
    check = commands.add_parser("check", help="check the histories of earlier runs again and print their table")
    check.add_argument("run_dirs", type=Path, nargs="+")
    check.add_argument("--out", type=Path, help="write the Markdown table there too")
    return parser


def _run(args: argparse.Namespace, console: Console) -> list[ScenarioRun]:
    numbers = args.scenario or (list(CI_SUBSET) if args.ci else sorted(BUILDERS))
    runs = args.runs or Path(tempfile.mkdtemp(prefix="atf-faults-"))
    outcomes: list[ScenarioRun] = []
    for number in numbers:
        scenario = _build({"number": number, "ci": args.ci, "soak_minutes": args.soak_minutes})
        console.print(f"[bold]scenario {number}[/bold]: {scenario.title} ...")
        outcome = run_scenario(scenario, runs, seed=args.seed + number)
        outcomes.append(outcome)
        verdict = "ok" if outcome.result.ok else "FAIL"
        console.print(f"  {verdict} in {outcome.seconds:.0f}s ({outcome.run_dir})")
    return outcomes


def _build(recipe: dict[str, Any]) -> Scenario:
    number, ci = int(recipe["number"]), bool(recipe["ci"])
    return soak(ci, float(recipe["soak_minutes"])) if number == 12 else BUILDERS[number](ci)


def _recheck(run_dir: Path) -> ScenarioRun:
    run = json.loads((run_dir / "run.json").read_text())
    if not run.get("recipe"):
        # Runs kept before run_scenario recorded the recipe itself (make test's passed none)
        raise SystemExit(f"{run_dir}: run.json does not say how the scenario was built; run it again")
    bounds = Bounds(**{**run["bounds"], "watched": tuple(run["bounds"]["watched"])})
    return judge(_build(run["recipe"]), run_dir, bounds, float(run["seconds"]))


if __name__ == "__main__":
    sys.exit(main())
