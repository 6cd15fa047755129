"""The embedded AWS for the guarantees suite: the local stack (moto's server on
loopback, the table and queues, DynamoDB's writes made atomic as in
atf_local.atomic, installed by LocalStack.start) without a consumer, which the suite runs itself.

    python -m atf_local.faults.server --config stack.json --aws-port 4566
"""

from __future__ import annotations

import argparse
from pathlib import Path

from atf_core.config import StackConfig
from atf_local.stack import LocalStack
from atf_local.stop_signal import StopSignal


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m atf_local.faults.server", description=__doc__)
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--aws-port", type=int, required=True)
    args = parser.parse_args(argv)
    stack = LocalStack(StackConfig.from_file(args.config), aws_port=args.aws_port, consumers=0, api_port=None)
    stop = StopSignal()
    stack.start(with_consumer=False)
    print(f"embedded AWS ready on {stack.endpoint}", flush=True)
    stop.wait()
    stack.stop()


if __name__ == "__main__":
    main()
