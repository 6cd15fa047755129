"""python -m bench: every benchmark, then bench/results/{report.md, results.json, *.png}.

    python -m bench                 # the full run (about ten minutes)
    python -m bench --quick         # shorter runs, to check the harness
    python -m bench --only cost capacity --out DIR   # a part, into DIR
    python -m bench --only capacity --reuse bench/results/results.json   # redo a part of the committed run

Each stack benchmark starts its own local stack (moto's servers, consumer,
frontend API, one worker host) on free loopback ports and stops every process
it started, also on Ctrl-C or SIGTERM. The throughput step then runs the peer,
Celery 5 on the same SQS server (bench/celery_peer.py), with as many tasks.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

STEPS = ("cost", "throughput", "lag", "consumer", "fairness", "capacity")
RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    if set(args.only) != set(STEPS) and not args.reuse and args.out.resolve() == RESULTS:
        # The committed results.json is one whole run: a partial one in its place would lose the other steps.
        parser.error(
            f"--only {' '.join(args.only)} without --reuse would replace {RESULTS / 'results.json'} with a partial "
            "run: give --out DIR, or --reuse bench/results/results.json to redo these steps on top of it"
        )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so every `finally` stops its processes
    from atf_local.environment import DUMMY_CREDENTIALS, REPO

    for key, value in DUMMY_CREDENTIALS.items():
        os.environ.setdefault(key, value)
    from bench.machine import describe

    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = json.loads(args.reuse.read_text()) if args.reuse else {"machine": describe(REPO)}
    work = Path(tempfile.mkdtemp(prefix="atf-bench-"))
    for step in STEPS:
        if step in args.only:
            started = time.monotonic()
            print(f"bench: {step} ...", flush=True)
            if args.reuse:  # a step run again on top of an earlier run: say when, at which commit, under which load
                again = describe(REPO)
                rerun = {k: again[k] for k in ("date", "commit", "load_at_start")}
            results[step] = RUNNERS[step](args, work / step, results)
            if args.reuse:
                results[step]["rerun"] = rerun
            print(f"bench: {step} done in {time.monotonic() - started:.0f}s", flush=True)
    _write(results, args.out)
    written = "report.md, results.json" if (args.out / "report.md").exists() else "results.json"
    print(f"bench: wrote {written} to {args.out} (logs of the stacks in {work})")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--only", nargs="+", choices=STEPS, default=list(STEPS))
    parser.add_argument("--quick", action="store_true", help="short runs: checks the harness, not the figures")
    parser.add_argument("--lag-rate", type=int, default=50)
    parser.add_argument("--lag-seconds", type=int, default=60)
    parser.add_argument("--tasks", type=int, default=600, help="tasks in the throughput run")
    parser.add_argument(
        "--consumer-tasks",
        type=int,
        # 20,000 (the figure) took well over half an hour here while every index Query of moto's
        # server sorted the whole table (the local stack now reads one partition, atf_local.fast_query).
        # The consumer's CPU per task, the figure that carries to AWS, does not depend on the count.
        default=4_000,
        help="due tasks (on 40 shards) of the consumer run",
    )
    parser.add_argument("--fairness-flood", type=int, default=5000, help="key A's tasks in the fairness run")
    parser.add_argument("--fairness-per-key", type=int, default=20, help="tasks of each of keys B..K there")
    parser.add_argument("--reuse", type=Path, help="start from a results.json (--only capacity: redo the model)")
    return parser


def _cost(args: argparse.Namespace, work: Path, results: dict[str, Any]) -> dict[str, Any]:
    from atf_core.config import StackConfig
    from atf_local.cost.command import measure
    from atf_local.cost.report import Estimate

    config = StackConfig.model_validate({"name": "default", "lambdas": {"work": {"priorities": ["normal"]}}})
    return measure(config, Estimate(batch=2 if args.quick else 10)).to_dict()


def _throughput(args: argparse.Namespace, work: Path, results: dict[str, Any]) -> dict[str, Any]:
    from bench.throughput import run_throughput

    work.mkdir(parents=True, exist_ok=True)
    if args.quick:
        return run_throughput(work, tasks=100, raw_processes=(2,), raw_seconds=5, peer_tasks=50)
    return run_throughput(work, tasks=args.tasks, raw_processes=(2, 4), raw_seconds=15, peer_tasks=args.tasks)


def _lag(args: argparse.Namespace, work: Path, results: dict[str, Any]) -> dict[str, Any]:
    """At the issue's rate, and, if the throughput run found that more than this machine sustains
    end to end, again at half the end-to-end throughput it measured."""
    from bench.lag import run_lag

    seconds = 10 if args.quick else args.lag_seconds
    runs = {"spec": run_lag(work / "spec", rate=args.lag_rate, seconds=seconds)}
    measured = (results.get("throughput") or {}).get("tasks_per_s")
    if measured is not None and measured / 2 < args.lag_rate:
        rate = max(2, int(measured / 2))
        runs["half of measured throughput"] = run_lag(work / "half", rate=rate, seconds=seconds)
        # The bench's lookahead (bench_config: 1 s) equals its poll interval, so a task due just after a poll
        # starts is found by that poll but sent only once the poll's sends are done: a lookahead that also
        # covers the poll (2 s, the local example's).
        runs["same, lookahead 2 s"] = run_lag(work / "half-2s", rate=rate, seconds=seconds, lookahead=2.0)
    return runs


def _consumer(args: argparse.Namespace, work: Path, results: dict[str, Any]) -> dict[str, Any]:
    """One consumer invocation's passes over due tasks on 40 shards, sequential I/O against overlapped."""
    from bench.consumer_passes import run_consumer_passes

    tasks = 1000 if args.quick else args.consumer_tasks
    return run_consumer_passes(work, tasks=tasks, shards=40, per_pass=500)


def _fairness(args: argparse.Namespace, work: Path, results: dict[str, Any]) -> dict[str, Any]:
    """Key A floods, keys B..K schedule a few each at the same moment: B..K's start-lag against no flood."""
    from bench.fairness import run_fairness

    flood, per_key = (200, 5) if args.quick else (args.fairness_flood, args.fairness_per_key)
    return run_fairness(work, flood=flood, per_key=per_key)


def _capacity(args: argparse.Namespace, work: Path, results: dict[str, Any]) -> dict[str, Any]:
    from bench.capacity import Assumptions, model

    assumptions = Assumptions()
    if "cost" in results:
        assumptions = replace(assumptions, write_units_per_task=results["cost"]["scenarios"][0]["write_units"])
    if "throughput" in results:
        run = results["throughput"]
        cpu = run["cpu_s_per_task"]
        # The consumer's CPU is recorded beside the planning figure (atf_core.sizing), not put in its place:
        # the groups must be what the CDK app deploys, and the report says when a measurement passes the plan.
        measured = cpu.get("consumer")
        assumptions = replace(
            assumptions,
            sqs_requests_per_task=round(run["sqs_requests_per_task"], 3),
            consumer_cpu_s_measured=None if measured is None else round(measured, 5),
            worker_cpu_s_per_task=round(cpu.get("controller", 0) + cpu.get("executors", 0), 4)
            or assumptions.worker_cpu_s_per_task,
        )
    return model(a=assumptions)


RUNNERS = {
    "cost": _cost,
    "throughput": _throughput,
    "lag": _lag,
    "consumer": _consumer,
    "fairness": _fairness,
    "capacity": _capacity,
}


def _write(results: dict[str, Any], out: Path) -> None:
    from bench import report

    (out / "results.json").write_text(json.dumps(_slim(results), indent=1, default=str))
    if {"cost", "throughput", "lag", "capacity"} <= results.keys():
        (out / "report.md").write_text(report.render(results))
    _figures(results, out)


def _figures(results: dict[str, Any], out: Path) -> None:
    """The PNG figures. matplotlib is bench/requirements.txt's, not `make setup`'s: without it, none."""
    if not {"lag", "throughput", "cost"} & results.keys():
        return
    try:
        from bench import plots
    except ImportError:
        print("bench: figures not drawn: matplotlib is not installed (pip install -r bench/requirements.txt)")
        return
    # A reused results.json has no per-task series: its figures stay as they were.
    if "lag" in results and all("lags_ms" in run for run in results["lag"].values()):
        plots.lag_histogram(results["lag"], out / "start_lag_histogram.png")
        plots.lag_over_time(results["lag"], out / "start_lag_over_time.png")
    if "submitted" in results.get("throughput", {}):
        plots.throughput_timeline(results["throughput"], out / "throughput.png")
    if "cost" in results:
        plots.cost_bars(results["cost"], out / "cost.png")


def _slim(results: dict[str, Any]) -> dict[str, Any]:
    """results.json without the per-task series (the plots have them)."""
    slim = json.loads(json.dumps(results, default=str))
    for run in (slim.get("lag") or {}).values():
        run.pop("lags_ms", None)
        run.pop("run_at_lags", None)
    for run in (slim.get("throughput"),):
        for key in ("submitted", "completed_at", "started_at"):
            (run or {}).pop(key, None)
    return slim


if __name__ == "__main__":
    main()
