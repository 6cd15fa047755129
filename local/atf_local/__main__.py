"""python -m atf_local serve | consumer | demo"""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path

from atf_core.config import StackConfig
from atf_local.stack import REPO, LocalStack

DEFAULT_CONFIG = REPO / "examples" / "stack.json"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="atf_local", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="start the local stack and serve until interrupted")
    serve.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    serve.add_argument("--aws-port", type=int, default=4566)
    serve.add_argument("--consumers", type=int, default=1)
    serve.add_argument("--api-port", type=int, default=8080, help="the frontend API on 127.0.0.1 (0: none)")
    serve.add_argument("--console-port", type=int, default=8081, help="the web console on 127.0.0.1 (0: none)")
    consumer = commands.add_parser("consumer", help="run the consumer Lambda's handler in a loop")
    consumer.add_argument("--group", type=int, default=0)
    consumer.add_argument("--groups", type=int, default=1)
    demo = commands.add_parser("demo", help="the local stack, a worker host and a demo mix of tasks")
    demo.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    demo.add_argument("--aws-port", type=int, default=4566)
    demo.add_argument("--api-port", type=int, default=8080)
    args = parser.parse_args(argv)
    if args.command == "serve":
        _serve(
            StackConfig.from_file(args.config), args.aws_port, args.consumers, args.api_port or None,
            args.console_port or None,
        )  # fmt: skip
    elif args.command == "consumer":
        from atf_local.consumer_process import run_forever

        run_forever(group_index=args.group, groups=args.groups)
    elif args.command == "demo":
        from atf_local.demo import run_demo

        run_demo(StackConfig.from_file(args.config), args.aws_port, args.api_port)


def _serve(
    config: StackConfig, aws_port: int, consumers: int, api_port: int | None = 8080, console_port: int | None = None
) -> None:
    stack = LocalStack(config, aws_port=aws_port, consumers=consumers, api_port=api_port, console_port=console_port)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    signal.signal(signal.SIGINT, lambda *_: stopped.set())
    stack.start()
    print(f"ATF local stack ready: AWS endpoint {stack.endpoint}, table {config.table_name}", flush=True)
    if api_port is not None:
        print(f"  API: export ATF_API_URL={stack.api_url}   (see docs/api.md)", flush=True)
    if stack.console_url is not None:
        print(f"  console: {stack.console_url}   (atf top --console-url {stack.console_url})", flush=True)
    print(
        f"  export ATF_AWS_ENDPOINT={stack.endpoint} AWS_ACCESS_KEY_ID=local"
        " AWS_SECRET_ACCESS_KEY=local AWS_DEFAULT_REGION=us-east-1",
        flush=True,
    )
    stopped.wait()
    stack.stop()


if __name__ == "__main__":
    main()
