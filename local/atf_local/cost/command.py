"""atf cost: what a task costs on AWS, measured by running the framework's own code.

    atf cost --config stack.json [--payload-bytes 200] [--rate 100] [--tasks-per-request 100] [--json]

Each lifecycle (atf_local.cost.lifecycles) runs through the framework's own
components on an embedded in-process AWS (moto), every call billed by
atf_local.cost.billing's rules. A task's bill is a function of the code, the
stack's configuration and the payload size, not of where it runs, so the
figures hold for a deployed stack with the same configuration; nothing is sent
to a running stack. (The metered benchmarks under bench/ measure SQS requests
per task under load, where batches fill less than here.)

The verb is the local stack's: the CLI finds it through the `atf.commands`
entry point atf-local declares, so it exists wherever the local stack is
installed and the SDK wheel carries none of it.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atf_local.cost.estimate import Estimate
from atf_sdk.commands.stack_file import CONFIG_HELP
from atf_sdk.commands.support import at_least_one

# The rest is imported when the verb runs: the CLI adds this verb to its parser for every command it runs,
# and the lifecycles bring the consumer, the worker's parts, boto3 and moto (~0.3 s of CPU).
if TYPE_CHECKING:
    from atf_core.config import StackConfig
    from atf_local.cost.report import CostReport


def measure(config: StackConfig, estimate: Estimate | None = None, only: tuple[str, ...] | None = None) -> CostReport:
    """Run every lifecycle (or those named) on a fresh embedded AWS and price it."""
    from atf_local.cost.billing import peer_costs
    from atf_local.cost.lifecycles import SCENARIOS, run_lifecycles
    from atf_local.cost.report import CostReport, fixed_costs, frontend_costs, per_task

    only = SCENARIOS if only is None else only
    estimate = estimate or Estimate()
    scenarios = [
        per_task(name, run.meter.bill, run.steps, estimate.batch)
        for name, run in run_lifecycles(config, estimate, only)
    ]
    return CostReport(
        config_name=config.name,
        estimate=estimate,
        scenarios=scenarios,
        fixed_per_second=fixed_costs(config, estimate),
        frontend_per_million=frontend_costs(estimate),
        peers=[asdict(p) for p in peer_costs()],
    )


def add_cost_command(subparsers: Any) -> argparse.ArgumentParser:
    verb: argparse.ArgumentParser = subparsers.add_parser(
        "cost", help="AWS cost per task for a stack configuration, measured on an embedded AWS"
    )
    verb.add_argument("--config", help=f"{CONFIG_HELP}, else the defaults")
    verb.add_argument("--payload-bytes", type=_number(int, 0, "bytes", inclusive=True), default=Estimate.payload_bytes)
    verb.add_argument(
        "--rate",
        type=_number(float, 0, "tasks a second"),
        default=Estimate.rate,
        help="tasks/s (above 0), to spread fixed costs over",
    )
    verb.add_argument(
        "--tasks-per-request",
        type=int,
        default=Estimate.tasks_per_request,
        choices=range(1, 101),
        metavar="1..100",
        help="tasks per API request (the batch route takes 100)",
    )
    verb.add_argument(
        "--frontend-ms",
        type=_number(float, 0, "milliseconds"),
        default=Estimate.frontend_ms,
        help="assumed frontend duration",
    )
    verb.add_argument("--consumer-groups", type=at_least_one, default=Estimate.consumer_groups)
    verb.add_argument(
        "--batch", type=at_least_one, default=Estimate.batch, help="tasks per lifecycle (10 fills SQS batches)"
    )
    verb.add_argument("--json", action="store_true", help="print JSON instead of tables")
    verb.set_defaults(run=run_cost_command)
    return verb


def _number(kind: Callable[[str], Any], low: float, what: str, inclusive: bool = False) -> Callable[[str], Any]:
    """An option's type: a finite number (int or float) above `low`, or at least it; else a usage error naming
    the option and what it counts. A rate of 0 would divide the fixed costs by nothing, a negative size would
    price nonsense. (A count of at least one is atf_sdk's `at_least_one`.)"""
    bound = f"of at least {low:g}" if inclusive else f"above {low:g}"

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of {what}") from None
        if not math.isfinite(value) or value < low or (value == low and not inclusive):  # NaN fails isfinite
            raise argparse.ArgumentTypeError(f"{text} is not a number of {what} {bound}")
        return value

    return parse


def run_cost_command(args: argparse.Namespace) -> int:
    from atf_local.cost.report import render

    config = _config(args.config)
    estimate = Estimate(
        payload_bytes=args.payload_bytes,
        rate=args.rate,
        tasks_per_request=args.tasks_per_request,
        frontend_ms=args.frontend_ms,
        consumer_groups=args.consumer_groups,
        batch=args.batch,
    )
    report = measure(config, estimate)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        render(report)
    return 0


def _config(path: str | None) -> StackConfig:
    from atf_core.config import StackConfig
    from atf_sdk.commands.stack_file import stack_config

    config = stack_config(Path(path) if path else None, "cost")
    return config if config is not None else StackConfig.model_validate({"lambdas": {"work": {}}})
