"""atf: the command line of the async task framework."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from atf_core.config import StackConfig


def _stack_config(path: Path | None) -> StackConfig:
    return StackConfig.from_file(path) if path else StackConfig.from_env()


def _worker(args: argparse.Namespace) -> None:
    from atf_sdk.worker.controller import ControllerSettings
    from atf_sdk.worker.host import HostSettings, WorkerHost

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s[%(process)d] %(message)s")
    sys.path.insert(0, os.getcwd())  # so "examples.lambdas:lambdas" resolves from where the host starts
    settings = HostSettings(
        lambdas_spec=args.lambdas,
        executors_per_lambda=args.executors,
        threads_per_executor=args.threads,
        only=tuple(args.only or ()),
        controller=ControllerSettings(receive_wait_s=args.receive_wait),
    )
    WorkerHost(_stack_config(args.config), settings).serve()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="atf", description="Async task framework for AWS")
    verbs = parser.add_subparsers(dest="verb", required=True)
    worker = verbs.add_parser("worker", help="run a worker host for the lambdas a module registers")
    worker.add_argument("lambdas", help="module:attribute of a Lambdas registry, e.g. examples.lambdas:lambdas")
    worker.add_argument("--config", type=Path, help="stack configuration file (default: $ATF_CONFIG)")
    worker.add_argument("--executors", type=int, default=2, help="executor processes per lambda")
    worker.add_argument("--threads", type=int, default=4, help="threads per executor")
    worker.add_argument("--only", action="append", help="serve only this lambda (repeatable)")
    worker.add_argument("--receive-wait", type=int, default=10, help="SQS long-poll seconds")
    worker.set_defaults(run=_worker)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    args.run(args)


if __name__ == "__main__":
    main()
