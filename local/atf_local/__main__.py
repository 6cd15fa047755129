"""python -m atf_local serve | consumer | demo | credentials"""

from __future__ import annotations

import argparse
import errno
import os
from pathlib import Path
from typing import NamedTuple

from pydantic import ValidationError

from atf_core.aws import ENDPOINT_ENV
from atf_core.config import CONFIG_ENV, CONFIG_FILE_ENV, StackConfig
from atf_local.environment import REPO, SQS_ENDPOINT_ENV, sqs_endpoint_of
from atf_local.iam.roles import WORKER
from atf_local.servers import freeze_survivors
from atf_local.stack import LocalStack
from atf_local.stop_signal import StopSignal

DEFAULT_CONFIG = REPO / "examples" / "stack.json"
WITHOUT_CONFIG = f"${CONFIG_ENV} (JSON), else ${CONFIG_FILE_ENV} (a path), else {DEFAULT_CONFIG.relative_to(REPO)}"


def serve_config(given: Path | None) -> tuple[StackConfig, Path | None]:
    """The configuration `serve` runs: --config, else WITHOUT_CONFIG (a worker host's order: the option,
    then the environment); and the file it came from (None: inline ATF_CONFIG). A bad one is one line."""
    inline, named = os.environ.get(CONFIG_ENV), os.environ.get(CONFIG_FILE_ENV)
    path = given or (None if inline else Path(named) if named else DEFAULT_CONFIG)
    source = str(path) if path is not None else f"${CONFIG_ENV}"
    try:
        config = StackConfig.from_file(path) if path is not None else StackConfig.model_validate_json(inline or "")
    except OSError as error:
        raise SystemExit(f"atf_local serve: cannot read the configuration {source}: {error.strerror}") from None
    except (ValueError, ValidationError) as error:  # JSON that does not parse, or a configuration pydantic refuses
        problem = str(error).replace("\n", "; ")
        raise SystemExit(f"atf_local serve: the configuration {source} is not valid: {problem}") from None
    return config, path.resolve() if path is not None else None


AWS_PORT_HELP = "the embedded AWS's endpoint on 127.0.0.1 (moto's server; SQS on a port of its own, printed)"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="atf_local", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="start the local stack and serve until interrupted")
    serve.add_argument("--config", type=Path, help=f"stack configuration (JSON) file; without it: {WITHOUT_CONFIG}")
    serve.add_argument("--aws-port", type=int, default=4566, help=AWS_PORT_HELP)
    serve.add_argument("--sqs-port", type=int, default=0, help="the embedded SQS on 127.0.0.1 (0: a free port)")
    serve.add_argument("--consumers", type=int, default=1, help="consumer processes (groups) polling the table")
    serve.add_argument("--api-port", type=int, default=8080, help="the frontend API on 127.0.0.1 (0: none)")
    serve.add_argument("--console-port", type=int, default=8081, help="the web console on 127.0.0.1 (0: none)")
    consumer = commands.add_parser("consumer", help="run the consumer Lambda's handler in a loop")
    consumer.add_argument("--group", type=int, default=0)
    consumer.add_argument("--groups", type=int, default=1)
    demo = commands.add_parser("demo", help="the local stack, a worker host and a demo mix of tasks")
    demo.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    demo.add_argument("--aws-port", type=int, default=4566, help=AWS_PORT_HELP)
    demo.add_argument("--api-port", type=int, default=8080, help="the frontend API on 127.0.0.1")
    credentials = commands.add_parser(
        "credentials", help="export lines for a running local stack's component role: a worker host's by default"
    )
    credentials.add_argument(
        "component", nargs="?", default=WORKER, help=f"{WORKER} (every lambda), {WORKER}-<lambda>, consumer, frontend"
    )
    credentials.add_argument("--aws-port", type=int, default=4566, help="the running stack's --aws-port")
    args = parser.parse_args(argv)
    if args.command == "serve":
        config, path = serve_config(args.config)
        ports = Ports(args.aws_port, args.sqs_port or None, args.api_port or None, args.console_port or None)
        _serve(config, path, ports, args.consumers)
    elif args.command == "consumer":
        from atf_local.consumer_process import run_forever

        run_forever(group_index=args.group, groups=args.groups)
    elif args.command == "demo":
        from atf_local.demo import run_demo

        run_demo(StackConfig.from_file(args.config), args.aws_port, args.api_port)
    elif args.command == "credentials":
        print(export_line(f"http://127.0.0.1:{args.aws_port}", args.component))


def export_line(endpoint: str, component: str) -> str:
    """`export ...` of what a process of `component` needs: the endpoint and its role's credentials."""
    from botocore.exceptions import BotoCoreError, ClientError

    from atf_local.iam.accounts import UnknownComponent, credentials

    try:
        given = credentials(endpoint, component)
    except UnknownComponent as error:
        raise SystemExit(f"atf_local credentials: {error}") from None
    except (BotoCoreError, ClientError) as error:
        raise SystemExit(
            f"atf_local credentials: no {component!r} role on a local stack at {endpoint}: {error}"
        ) from None
    endpoints = {ENDPOINT_ENV: endpoint, **({SQS_ENDPOINT_ENV: sqs} if (sqs := sqs_endpoint_of(endpoint)) else {})}
    return "export " + " ".join(f"{k}={v}" for k, v in {**endpoints, **given}.items())


class Ports(NamedTuple):
    """Where `serve` listens on 127.0.0.1; None: a free port (SQS) or not served (the API, the console)."""

    aws: int
    sqs: int | None
    api: int | None
    console: int | None

    def named(self) -> str:
        given = {"--aws-port": self.aws, "--sqs-port": self.sqs, "--api-port": self.api, "--console-port": self.console}
        return ", ".join(f"{option} {port}" for option, port in given.items() if port)


def _serve(config: StackConfig, path: Path | None, ports: Ports, consumers: int) -> None:
    freeze_survivors()  # this process serves DynamoDB: no full collection walks its tables
    stack = LocalStack(config, ports.aws, ports.sqs, consumers, api_port=ports.api, console_port=ports.console)
    stop = StopSignal()
    try:
        stack.start()
    except OSError as error:
        if error.errno != errno.EADDRINUSE:
            raise
        taken = f"{os.strerror(error.errno)} on 127.0.0.1 ({ports.named()})"
        raise SystemExit(f"atf_local serve: {taken}: stop what serves there, or pass another port") from None
    print(f"ATF local stack ready: AWS endpoint {stack.endpoint} (SQS served on {stack.sqs_endpoint}), "
          f"table {config.table_name}", flush=True)  # fmt: skip
    print(f"  configuration: {path or '$' + CONFIG_ENV}, lambdas {', '.join(config.lambdas) or 'none'}", flush=True)
    if ports.api is not None:
        print(f"  API: export ATF_API_URL={stack.api_url}   (see docs/api.md)", flush=True)
    if stack.console_url is not None:
        print(f"  console: {stack.console_url}   (atf top --console-url {stack.console_url})", flush=True)
    worker_config = f" {CONFIG_FILE_ENV}={path}" if path is not None else ""  # inline: the same ATF_CONFIG
    print("  a worker host (atf worker) needs the endpoint, the configuration and its role's credentials:", flush=True)
    exports = f"export{worker_config}; " if worker_config else ""
    print(f'  {exports}eval "$(python -m atf_local credentials {WORKER} --aws-port {ports.aws})"', flush=True)
    stop.wait()
    stack.stop()


if __name__ == "__main__":
    main()
