"""atf: the command line of the async task framework.

`atf worker` runs a worker host; every other verb talks to the frontend API
(ATF_API_URL, or --api-url) through the SDK's client, with human tables by
default and JSON with --json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atf_core.api import BatchItem
from atf_core.config import StackConfig
from atf_core.errors import AtfError
from atf_core.schema import Gate, ScheduleRequest, Task

if TYPE_CHECKING:
    from rich.console import Console

    from atf_sdk.client import AtfClient


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


# -- the API verbs ---------------------------------------------------------------


def _client(args: argparse.Namespace) -> AtfClient:
    from atf_sdk.client import API_URL_ENV, AtfClient

    endpoint = args.api_url or os.environ.get(API_URL_ENV)
    if not endpoint:
        raise SystemExit(f"atf: set {API_URL_ENV} or pass --api-url (the local stack: http://127.0.0.1:8080)")
    return AtfClient(endpoint, region=args.region)


def _json_out(value: Any) -> None:
    print(json.dumps(_plain(value), indent=None if isinstance(value, list) else 2, sort_keys=False))


def _plain(value: Any) -> Any:
    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _console(stderr: bool = False) -> Console:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def _when(moment: datetime | None) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z") if moment else "-"


def _schedule(args: argparse.Namespace) -> int:
    if args.file is not None:
        return _schedule_file(args)
    if args.lambda_name is None:
        raise SystemExit("atf schedule: give a LAMBDA or --file")
    fields = {
        "lambda": args.lambda_name,
        "payload": args.payload,
        "collection": args.collection,
        "priority": args.priority,
        "run_at": args.run_at,
        "delay_seconds": args.delay,
        "key": args.key,
        "max_attempts": args.max_attempts,
        "expire_at": args.expire_at,
    }
    request = ScheduleRequest.model_validate({k: v for k, v in fields.items() if v is not None})
    with _client(args) as client:
        task = client.submit(request)
    if args.json:
        _json_out(task)
    else:
        verb = "scheduled" if task.created else "already scheduled"
        _console().print(f"{verb} [bold]{task.id}[/] ({task.status.value}), runs at {_when(task.run_at)}")
    return 0


def _read_tasks(path: str) -> list[ScheduleRequest]:
    """Every line of a JSON-lines file as a request, all checked before any is sent."""
    from pydantic import ValidationError

    handle = sys.stdin if path == "-" else open(path, encoding="utf-8")  # noqa: SIM115 - closed below unless stdin
    requests = []
    try:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                requests.append(ScheduleRequest.model_validate_json(line))
            except ValidationError as error:
                problem = error.errors()[0]
                where = ".".join(str(part) for part in problem["loc"]) or "line"
                raise SystemExit(f"atf schedule: {path}:{number}: {where}: {problem['msg']}") from None
    finally:
        if handle is not sys.stdin:
            handle.close()
    return requests


def _schedule_file(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    requests = _read_tasks(args.file)
    columns = (TextColumn("scheduling"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with _client(args) as client, Progress(*columns, console=_console(stderr=True), transient=True) as progress:
        bar = progress.add_task("schedule", total=len(requests))
        results = client.schedule_many(requests, on_progress=lambda n: progress.advance(bar, n))
    if args.json:
        for item in results:
            print(item.model_dump_json())
    else:
        _print_batch_summary(results)
    return 0 if all(item.status in (200, 201) for item in results) else 1


def _print_batch_summary(results: list[BatchItem]) -> None:
    from rich.table import Table

    outcome = {201: "created", 200: "already scheduled", 409: "key reused"}
    counts: dict[str, int] = {}
    for item in results:
        label = outcome.get(item.status, f"failed ({item.status})")
        counts[label] = counts.get(label, 0) + 1
    table = Table("outcome", "tasks")
    for label, count in counts.items():
        table.add_row(label, str(count))
    console = _console()
    console.print(table)
    for item in [i for i in results if i.status not in (200, 201)][:20]:
        error = item.error
        console.print(f"  task {item.index + 1}: {error.code + ': ' + error.message if error else item.status}")


def _task_table(tasks: list[Task]) -> None:
    from rich.table import Table

    table = Table("id", "lambda", "collection", "priority", "status", "attempts", "scheduled", "finished", "last error")
    for task in tasks:
        error = f"{task.last_error.type}: {task.last_error.message}" if task.last_error else (task.reason or "")
        table.add_row(
            task.id,
            task.lambda_,
            task.collection,
            task.priority,
            task.status.value,
            f"{task.attempt}/{task.max_attempts}",
            _when(task.scheduled_at),
            _when(task.finished_at),
            error[:60],
        )
    _console().print(table)


def _status(args: argparse.Namespace) -> int:
    with _client(args) as client:
        tasks = [client.get(task_id) for task_id in args.ids]
    _json_out(tasks if len(tasks) > 1 else tasks[0]) if args.json else _task_table(tasks)
    return 0


def _cancel(args: argparse.Namespace) -> int:
    with _client(args) as client:
        tasks = [client.cancel(task_id) for task_id in args.ids]
    _json_out(tasks if len(tasks) > 1 else tasks[0]) if args.json else _task_table(tasks)
    return 0


def _gate(args: argparse.Namespace) -> int:
    with _client(args) as client:
        if args.action == "list":
            gates = client.gates()
        elif args.action == "resume":
            client.resume(args.lambda_name, args.collection)
            gates = []
        else:
            setter = client.pause if args.action == "pause" else client.drop
            gates = [setter(args.lambda_name, args.collection, until=args.until, reason=args.reason)]
    if args.json:
        _json_out({"lifted": True} if args.action == "resume" else gates)
    elif args.action == "resume":
        _console().print(f"lifted the gate on {args.lambda_name}/{args.collection or '*'}")
    else:
        _gate_table(gates)
    return 0


def _gate_table(gates: list[Gate]) -> None:
    from rich.table import Table

    table = Table("lambda", "collection", "action", "until", "reason", "since")
    for gate in gates:
        table.add_row(
            gate.lambda_,
            gate.collection or "*",
            gate.action.value,
            _when(gate.until),
            gate.reason,
            _when(gate.created_at),
        )
    _console().print(table if gates else "no gates in force")


def _stats(args: argparse.Namespace) -> int:
    from rich.table import Table

    with _client(args) as client:
        stats = client.stats(args.lambda_name)
    if args.json:
        _json_out(stats)
        return 0
    table = Table("priority", "scheduled", "due", "started", title=f"{stats.lambda_} at {_when(stats.as_of)}")
    for priority, counts in stats.priorities.items():
        table.add_row(priority, str(counts.scheduled), str(counts.due), str(counts.started))
    console = _console()
    console.print(table)
    console.print("states: " + (", ".join(f"{s.value} {n}" for s, n in stats.states.items()) or "none live"))
    oldest = stats.oldest_due
    console.print(
        f"oldest due: {oldest.id} ({oldest.status.value}), waiting {oldest.waiting_s:.1f}s"
        if oldest
        else "oldest due: none"
    )
    lag = stats.start_lag
    console.print(
        f"start-lag (first attempts, n={lag.samples}): p50 {lag.p50_ms} ms, p90 {lag.p90_ms} ms, max {lag.max_ms} ms"
        if lag.samples
        else "start-lag: no live task has started yet"
    )
    if not stats.complete:
        backlog = sum(c.due + c.started for c in stats.priorities.values())
        console.print(
            f"[yellow]partial: states are those of the oldest {stats.sampled} of {backlog} due or started "
            "tasks (a count over many pages may also be a lower bound)[/]"
        )
    return 0


def _guarded(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """API and input errors as one line (or a JSON object with --json) and exit status 1."""

    def guarded(args: argparse.Namespace) -> int:
        from pydantic import ValidationError

        try:
            return run(args)
        except AtfError as error:
            body = error.to_dict()
        except ValidationError as error:
            problem = error.errors()[0]
            field = ".".join(str(part) for part in problem["loc"]) or None
            body = {"code": "invalid_input", "message": str(problem["msg"]), "field": field}
        if args.json:
            print(json.dumps(body), file=sys.stderr)
        else:
            where = f" ({body['field']})" if body.get("field") else ""
            print(f"atf: {body['code']}: {body['message']}{where}", file=sys.stderr)
        return 1

    return guarded


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not JSON: {error}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("the payload must be a JSON object")
    return value


def _time(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not an RFC 3339 time: {error}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print JSON instead of tables")
    common.add_argument("--api-url", help="the API's URL (default: $ATF_API_URL)")
    common.add_argument("--region", help="region to sign for (default: from the URL or boto3's configuration)")
    return common


def _add_schedule(verbs: Any, common: argparse.ArgumentParser) -> None:
    verb = verbs.add_parser("schedule", parents=[common], help="schedule a task, or every task of a JSON-lines file")
    verb.add_argument("lambda_name", nargs="?", metavar="LAMBDA")
    verb.add_argument("--file", help="JSON lines, one schedule request a line ('-' for stdin); shows progress")
    verb.add_argument("--payload", type=_json_object, help="the payload, a JSON object")
    verb.add_argument("--collection")
    verb.add_argument("--priority")
    when = verb.add_mutually_exclusive_group()
    when.add_argument("--run-at", type=_time, help="RFC 3339 time, e.g. 2026-01-01T00:00:00Z")
    when.add_argument("--delay", type=float, help="seconds from now")
    verb.add_argument("--key", help="idempotency key (default: a new one)")
    verb.add_argument("--max-attempts", type=int)
    verb.add_argument("--expire-at", type=_time, help="RFC 3339 time after which a task not yet started expires")
    verb.set_defaults(run=_guarded(_schedule))


def _add_api_verbs(verbs: Any) -> None:
    common = _common()
    _add_schedule(verbs, common)
    for name, run, text in (("status", _status, "show tasks"), ("cancel", _cancel, "cancel tasks not yet started")):
        verb = verbs.add_parser(name, parents=[common], help=text)
        verb.add_argument("ids", nargs="+", metavar="ID")
        verb.set_defaults(run=_guarded(run))
    gate = verbs.add_parser("gate", parents=[common], help="pause, drop or resume a lambda or collection; list gates")
    gate.add_argument("action", choices=["pause", "drop", "resume", "list"])
    gate.add_argument("lambda_name", nargs="?", metavar="LAMBDA")
    gate.add_argument("collection", nargs="?", metavar="COLLECTION")
    gate.add_argument("--until", type=_time, help="RFC 3339 time the gate lifts itself")
    gate.add_argument("--reason", default="")
    gate.set_defaults(run=_guarded(_gate_checked))
    stats = verbs.add_parser("stats", parents=[common], help="counts by state and priority, oldest due, start-lag")
    stats.add_argument("lambda_name", metavar="LAMBDA")
    stats.set_defaults(run=_guarded(_stats))


def _gate_checked(args: argparse.Namespace) -> int:
    if args.action != "list" and not args.lambda_name:
        raise SystemExit(f"atf gate {args.action}: name a LAMBDA")
    return _gate(args)


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
    _add_api_verbs(verbs)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int | None] = args.run
    sys.exit(run(args) or 0)


if __name__ == "__main__":
    main()
