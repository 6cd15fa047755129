"""atf: the command line of the async task framework.

`atf worker` runs a worker host (`atf worker-health` checks it); every other verb talks to the frontend API
(ATF_API_URL, or --api-url) through the SDK's client, with human tables by
default and JSON with --json. The verbs for dead letters, schedules and chains
live in atf_sdk.commands; `atf top` in atf_sdk.top, which needs rich (the cli extra; its
options in atf_sdk.commands.top); and the verbs installed packages declare
under the `atf.commands` entry point (`atf cost`, with the local stack).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atf_core.vocabulary import LAMBDA_ENV
from atf_sdk import __version__
from atf_sdk.commands.chains import add_chains_command
from atf_sdk.commands.completion import add_completion_command
from atf_sdk.commands.dead_letters import add_dead_letters_command
from atf_sdk.commands.schedules import add_schedules_command
from atf_sdk.commands.stack_file import CONFIG_HELP
from atf_sdk.commands.support import (
    ON_CONFLICT,
    Exit,
    add_lambda,
    add_yes,
    at_least_one,
    client,
    common,
    confirmed,
    console,
    each_id,
    given_once,
    guarded,
    json_object,
    json_out,
    moment,
    progress,
    report_refused,
    usage,
    wait_seconds,
    when,
)
from atf_sdk.commands.task_changes import add_task_change_commands
from atf_sdk.commands.top import add_top_command
from atf_sdk.extras import extra_for, install_hint
from atf_sdk.worker.health import DEFAULT_HEALTH_FILE, HEALTH_FILE_ENV

# What the verbs need is imported where they run: the parser is built whole for every command, and the core's
# models, boto3, rich and the cost verb's embedded AWS would cost each command (`atf --help` too) a second of CPU.
if TYPE_CHECKING:
    from atf_core.api import BatchItem
    from atf_core.config import StackConfig
    from atf_core.errors import AtfError
    from atf_core.schema import Gate, ScheduleRequest, Task
    from atf_core.stats import LambdaStats
    from atf_sdk.client import AtfClient
    from atf_sdk.worker.host import HostSettings

INTERRUPTED = 130  # the shell's status for a process Ctrl-C ended (128 + SIGINT)
COMMANDS_GROUP = "atf.commands"  # entry points of other packages that add a verb
EXITS = "exit status: " + ", ".join(f"{e.value} {e.name.lower().replace('_', ' ')}" for e in Exit)
HEALTH_FILE_HELP = f"where the host reports its health (default: ${HEALTH_FILE_ENV}, else {DEFAULT_HEALTH_FILE})"


def _stack_config(path: Path | None) -> StackConfig:
    """The stack configuration from --config or the environment; one line and exit status 2 if there is none
    or it does not read."""
    from atf_sdk.commands.stack_file import stack_config

    config = stack_config(path, "worker")
    if config is None:
        usage("atf worker: no stack configuration: pass --config FILE, or set ATF_CONFIG (JSON) or ATF_CONFIG_FILE")
    return config


def _worker(args: argparse.Namespace) -> None:
    from atf_sdk.worker.stop_signals import stop_signals_held

    with stop_signals_held():  # a Ctrl-C in our imports or the configuration ends the host just after them
        from atf_sdk.worker.host import HostError, LambdasMisnamed, WorkerHost

        settings, config = _host_settings(args), _stack_config(args.config)
    try:
        WorkerHost(config, settings).serve()
    except LambdasMisnamed as error:  # how it was started, as a wrong argument: exit status 2
        usage(f"atf worker: {error}")
    except HostError as error:  # what it cannot reach or make
        raise SystemExit(f"atf worker: {error}") from None


def _host_settings(args: argparse.Namespace) -> HostSettings:
    from atf_sdk.worker.controller import ControllerSettings
    from atf_sdk.worker.health import health_file
    from atf_sdk.worker.host import HostSettings
    from atf_sdk.worker.observe import setup_logging

    setup_logging()  # JSON lines on stdout from the start; errors that stop the host are one line on stderr
    sys.path.insert(0, os.getcwd())  # so "examples.lambdas:lambdas" resolves from where the host starts
    # The CDK app sets ATF_LAMBDA on each worker service: a host started from the image serves that lambda.
    from_env = [n.strip() for n in os.environ.get(LAMBDA_ENV, "").split(",") if n.strip()]
    return HostSettings(
        lambdas_spec=args.lambdas,
        executors_per_lambda=args.executors,
        threads_per_executor=args.threads,
        only=tuple(args.only or from_env),
        only_from="--only" if args.only else LAMBDA_ENV,
        metrics=args.metrics,
        controller=ControllerSettings(receive_wait_s=args.receive_wait, prefetch_per_lambda=args.prefetch),
        health_file=health_file(args.health_file),
    )


def _worker_health(args: argparse.Namespace) -> int:
    from atf_sdk.worker.health import probe

    return probe(args.health_file)


# -- the API verbs ---------------------------------------------------------------


def _schedule(args: argparse.Namespace) -> int:
    from atf_core.errors import InputError
    from atf_core.schema import ScheduleRequest
    from atf_sdk.operations import checked

    if args.file is not None:
        return _schedule_file(args)
    if args.lambda_name is None:
        raise InputError("give a LAMBDA or --file", "lambda")
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
        "timeout_seconds": args.timeout,
        "flow_key": args.flow_key,
        "on_conflict": args.on_conflict,
    }
    request = checked(ScheduleRequest, {k: v for k, v in fields.items() if v is not None})
    with client(args) as atf:
        task = atf.submit(request)
    if args.quiet:
        print(task.id)
    elif args.json:
        json_out(task)
    else:
        verb = "scheduled" if task.created else "merged into" if task.debounced else "already scheduled"
        console().print(f"{verb} [bold]{task.id}[/] ({task.status.value}), runs at {when(task.run_at)}")
        if task.replaced is not None:
            console().print(f"replaced {task.replaced} (cancelled) as its flow key's holder")
    return 0


def _read_tasks(path: str) -> list[ScheduleRequest]:
    """Every line of a JSON-lines file as a request, all checked before any is sent."""
    from pydantic import ValidationError

    from atf_core.errors import InputError, MalformedJson, input_error
    from atf_core.schema import ScheduleRequest

    try:
        handle = sys.stdin if path == "-" else open(path, encoding="utf-8")  # noqa: SIM115 - closed below unless stdin
    except OSError as error:
        raise InputError(f"cannot read {path}: {error.strerror}", "file") from None
    requests: list[ScheduleRequest] = []
    try:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                given_once(line, f"tasks[{len(requests)}]")
                requests.append(ScheduleRequest.model_validate_json(line))
            except MalformedJson as twice:
                raise MalformedJson(f"{path}:{number}: {twice.message}", twice.field) from None
            except ValidationError as error:
                # Named as the API names a task of the batch it is sent as (tasks[i], from 0), and by its line
                problem = input_error(error)
                within = problem.field not in (None, "body")  # "body": the line as a whole, the API's tasks[i]
                field = f"tasks[{len(requests)}]" + (f".{problem.field}" if within else "")
                raise type(problem)(f"{path}:{number}: {problem.message}", field) from None
    except UnicodeDecodeError as error:  # read a block at a time: the line is not known, the file is at fault
        raise InputError(f"cannot read {path}: not UTF-8 ({error.reason})", "file") from None
    finally:
        if handle is not sys.stdin:
            handle.close()
    return requests


def _schedule_file(args: argparse.Namespace) -> int:
    from atf_core.errors import InputError

    given = [label for dest, label in args.one_task_options.items() if getattr(args, dest) is not None]
    if given:  # each line is a whole request: an option beside it would be silently ignored, or half applied
        raise InputError(f"{', '.join(given)}: not taken with --file (each line is a whole request)", "file")
    requests = _read_tasks(args.file)
    with client(args) as atf, progress("scheduling", len(requests)) as advance:
        results = atf.schedule_many(requests, on_progress=advance)
    if args.quiet:
        _print_batch_ids(results)
    elif args.json:
        for item in results:
            print(item.model_dump_json())
    else:
        _print_batch_summary(results)
    return Exit.OK if all(item.status in (200, 201) for item in results) else Exit.FAILED


def _print_batch_ids(results: list[BatchItem]) -> None:
    """One line a task, in the file's order: its id, or an empty line for a task not scheduled (so the
    n-th line is the n-th task's), with why on stderr."""
    for item in results:
        print(item.task.id if item.task is not None else "")
        if item.task is None:
            print(f"atf: {_item_refusal(item)}", file=sys.stderr)


def _item_refusal(item: BatchItem) -> str:
    """Why a task of the file was not scheduled, named tasks[i].field as a bad line of the file is named."""
    error = item.error
    if error is None:
        return f"tasks[{item.index}]: {item.status}"
    where = f"tasks[{item.index}]" + (f".{error.field}" if error.field else "")
    return f"{where}: {error.code}: {error.message}"


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
    out = console()
    out.print(table)
    for item in [i for i in results if i.status not in (200, 201)][:20]:
        out.print(f"  {_item_refusal(item)}", markup=False)


def _task_table(tasks: list[Task]) -> None:
    from rich.table import Table

    table = Table("id", "lambda", "collection", "priority", "status", "attempts", "scheduled", "finished", "last error")
    for task in tasks:
        # The attempt it came from: beside a task that ended well, an error is its history, not its outcome.
        failed = task.last_error
        error = f"attempt {failed.attempt}: {failed.type}: {failed.message}" if failed else (task.reason or "")
        table.add_row(
            task.id,
            task.lambda_,
            task.collection if task.flow_key is None else f"{task.collection} (flow key {task.flow_key})",
            task.priority,
            task.status.value,
            f"{task.attempt}/{task.max_attempts}",
            when(task.scheduled_at),
            when(task.finished_at),
            error[:60],
        )
    console().print(table)


def _status(args: argparse.Namespace) -> int:
    with client(args) as atf:
        tasks, refused = (
            _finished(atf, args.ids, args.wait, args.lambda_name)
            if args.wait is not None
            else each_id(args.ids, lambda one: atf.get(one, lambda_name=args.lambda_name))
        )
    if args.json:
        json_out(tasks)  # a list, however many ids: one shape for scripts
    elif tasks or not refused:  # not an empty table above the lines saying why no task is shown
        _task_table(tasks)
        if len(tasks) == 1 and tasks[0].error_history():
            _error_history(tasks[0])
        if len(tasks) == 1 and tasks[0].result is not None:
            console().print("result:", json.dumps(tasks[0].result, ensure_ascii=False), markup=False)
    waiting = [t for t in tasks if not t.status.settled] if args.wait is not None else []
    if waiting:
        names = ", ".join(f"{t.id} ({t.status.value})" for t in waiting)
        print(f"atf: not finished after {args.wait:g} s: {names}", file=sys.stderr)
    outcome = report_refused(args, refused, len(tasks))
    return Exit.FAILED if waiting and outcome is Exit.OK else outcome


def _finished(
    atf: AtfClient, ids: list[str], wait_s: float, lambda_name: str | None
) -> tuple[list[Task], list[tuple[str, AtfError]]]:
    """The tasks once every one has settled (ended, or a dead letter), or as they stand after wait_s."""
    deadline = time.monotonic() + wait_s

    def settled(task_id: str) -> Task:
        try:
            return atf.wait(task_id, timeout_s=max(0.0, deadline - time.monotonic()), lambda_name=lambda_name)
        except TimeoutError:
            return atf.get(task_id, lambda_name=lambda_name)

    with progress("finished", len(ids)) as advance:
        return each_id(ids, settled, advance)


def _error_history(task: Task) -> None:
    """The failed attempts one task keeps: what a dead letter is inspected for."""
    from rich.table import Table

    table = Table("attempt", "at", "host", "error", title=f"errors of {task.id}")
    for error in task.error_history():
        table.add_row(str(error.attempt), when(error.at), error.host or "-", f"{error.type}: {error.message}"[:100])
    console().print(table)


def _cancel(args: argparse.Namespace) -> int:
    if len(args.ids) > 1 and not confirmed(args, f"cancel {len(args.ids)} tasks?"):
        return Exit.FAILED
    with client(args) as atf, progress("cancelling", len(args.ids)) as advance:
        tasks, refused = each_id(args.ids, lambda one: atf.cancel(one, lambda_name=args.lambda_name), advance)
    if args.json:
        json_out(tasks)
    elif tasks:  # not an empty table above the lines saying why no task was cancelled
        _task_table(tasks)
    return report_refused(args, refused, len(tasks))


def _gate(args: argparse.Namespace) -> int:
    from atf_core.schema import gate_scope

    with client(args) as atf:
        if args.action == "list":
            gates = atf.gates()
        elif args.action == "resume":
            atf.resume(args.lambda_name, args.collection)
            gates = []
        else:
            if args.action == "drop":
                question = f"drop the tasks of {gate_scope(args.lambda_name, args.collection)} instead of running them?"
                if not confirmed(args, question):
                    return Exit.FAILED
            setter = atf.pause if args.action == "pause" else atf.drop
            gates = [setter(args.lambda_name, args.collection, until=args.until, reason=args.reason)]
    if args.json:
        json_out({"lifted": True} if args.action == "resume" else gates)
    elif args.action == "resume":
        console().print(f"lifted the gate on {gate_scope(args.lambda_name, args.collection)}")
    else:
        _gate_table(gates)
    return 0


def _gate_table(gates: list[Gate]) -> None:
    from rich.table import Table

    from atf_core.schema import ANY_COLLECTION

    table = Table("lambda", "collection", "action", "until", "reason", "since")
    for gate in gates:
        table.add_row(
            gate.lambda_,
            gate.collection or ANY_COLLECTION,
            gate.action.value,
            # To the millisecond where it has them: cut to the second, it read earlier than the gate lifts
            when(gate.until, "milliseconds" if gate.until and gate.until.microsecond else "seconds"),
            gate.reason,
            when(gate.created_at),
        )
    console().print(table if gates else "no gates in force")


def _stats(args: argparse.Namespace) -> int:
    with client(args) as atf:
        stats = atf.stats(args.lambda_name)
    if args.json:
        json_out(stats)
        return 0
    _print_live(stats)
    _print_beyond(stats)
    _print_keys(stats)
    if not stats.complete:
        backlog = sum(c.due + c.started for c in stats.priorities.values())
        console().print(
            f"[yellow]partial: states are those of the oldest {stats.sampled} of {backlog} due or started "
            "tasks (a count over many pages, or the schedules past the first 200, may also be missing)[/]"
        )
    return 0


def _print_live(stats: LambdaStats) -> None:
    from rich.table import Table

    table = Table("priority", "scheduled", "due", "started", title=f"{stats.lambda_} at {when(stats.as_of)}")
    for priority, counts in stats.priorities.items():
        table.add_row(priority, str(counts.scheduled), str(counts.due), str(counts.started))
    out = console()
    out.print(table)
    out.print("states: " + (", ".join(f"{s.value} {n}" for s, n in stats.states.items()) or "none live"))
    oldest = stats.oldest_due
    out.print(
        f"oldest due: {oldest.id} ({oldest.status.value}), waiting {oldest.waiting_s:.1f}s"
        if oldest
        else "oldest due: none"
    )
    lag = stats.start_lag
    out.print(
        f"start-lag (first attempts, n={lag.samples}): p50 {lag.p50_ms} ms, p90 {lag.p90_ms} ms, max {lag.max_ms} ms"
        if lag.samples
        else "start-lag: no live task has started yet"
    )


def _print_beyond(stats: LambdaStats) -> None:
    """Dead letters, schedules and limits: what issue 7 added to the stats."""
    out = console()
    out.print(f"dead letters: {stats.dead_letters}" + (" (atf dead-letters list)" if stats.dead_letters else ""))
    for s in stats.schedules:
        cadence = f"every {s.every_seconds:g} s" if s.every_seconds is not None else f"cron '{s.cron}' {s.timezone}"
        state = "paused" if s.paused else f"next {when(s.next_occurrence)}"
        out.print(f"schedule {s.name}: {cadence} into {s.collection}, {state}, fired {s.fired}, skipped {s.skipped}")
    scopes = [("lambda", stats.limits), *((f"collection {c}", lim) for c, lim in stats.collection_limits.items())]
    if stats.key_limits is not None:
        scopes.append((f"each flow key, over the rate: {stats.key_limits.over_rate.value}", stats.key_limits))
    for scope, limits in scopes:
        caps = [f"{limits.max_starts_per_second:g} starts/s" if limits.max_starts_per_second else ""]
        caps.append(f"{limits.max_running} running" if limits.max_running else "")
        if any(caps):
            out.print(f"limits ({scope}): " + ", at most ".join(c for c in caps if c))
    debounce = stats.key_limits.debounce if stats.key_limits is not None else None
    if debounce is not None:
        out.print(
            f"debounce (each flow key): a burst runs once, {debounce.quiet_seconds:g} s after its last task, "
            f"at most {debounce.max_delay_seconds:g} s after its first"
        )


def _print_keys(stats: LambdaStats) -> None:
    from rich.table import Table

    if stats.keys:
        table = Table("flow key", "due", "started", title="busiest flow keys")
        for key in stats.keys:
            table.add_row(key.flow_key, str(key.due), str(key.started))
        console().print(table)


def _add_schedule(verbs: Any, parent: argparse.ArgumentParser) -> None:
    verb = verbs.add_parser("schedule", parents=[parent], help="schedule a task, or every task of a JSON-lines file")
    verb.add_argument(
        "--file", help="JSON lines, one whole schedule request a line ('-' for stdin; no LAMBDA nor task options)"
    )
    timing = verb.add_mutually_exclusive_group()
    # What says one task: a file's lines say all of it for each, so --file refuses these beside it
    one_task = [
        verb.add_argument("lambda_name", nargs="?", metavar="LAMBDA"),
        verb.add_argument("--payload", type=json_object, help="the payload, a JSON object"),
        verb.add_argument("--collection"),
        verb.add_argument("--priority"),
        timing.add_argument("--run-at", type=moment, help="RFC 3339 time, e.g. 2026-01-01T00:00:00Z"),
        timing.add_argument("--delay", type=float, help="seconds from now"),
        verb.add_argument("--key", help="idempotency key (default: a new one)"),
        verb.add_argument(
            "--flow-key", help="flow-control key (say, a customer id): the lambda's key_limits apply per key"
        ),
        verb.add_argument(
            "--on-conflict",
            choices=ON_CONFLICT,
            help="a singleton flow key held by another task: refuse (default) or replace that task if it has not "
            "started",
        ),
        verb.add_argument("--max-attempts", type=int),
        verb.add_argument("--expire-at", type=moment, help="RFC 3339 time after which a task not yet started expires"),
        verb.add_argument(
            "--timeout", type=float, metavar="SECONDS", help="stop an attempt running longer (default: the lambda's)"
        ),
    ]
    verb.add_argument(
        "-q", "--quiet", action="store_true", help="print only the task id (with --file one a line, empty if refused)"
    )
    labels = {action.dest: action.option_strings[0] if action.option_strings else action.metavar for action in one_task}
    verb.set_defaults(run=guarded(_schedule), one_task_options=labels)


def _add_api_verbs(verbs: Any) -> None:
    parent = common()
    _add_schedule(verbs, parent)
    for name, run, text in (("status", _status, "show tasks"), ("cancel", _cancel, "cancel tasks not yet started")):
        verb = verbs.add_parser(name, parents=[parent], help=text)
        verb.add_argument("ids", nargs="+", metavar="ID")
        add_lambda(verb)
        verb.set_defaults(run=guarded(run))
        if name == "cancel":
            add_yes(verb)  # more than one id asks first
        if name == "status":
            verb.add_argument(
                "--wait",
                type=wait_seconds,
                metavar="SECONDS",
                help="until every task has ended or is a dead letter, at most SECONDS (then exit 1)",
            )
    gate = verbs.add_parser("gate", parents=[parent], help="pause, drop or resume a lambda or collection; list gates")
    gate.add_argument("action", choices=["pause", "drop", "resume", "list"])
    gate.add_argument("lambda_name", nargs="?", metavar="LAMBDA")
    gate.add_argument("--collection", help="gate one collection of the lambda (default: all of them)")
    gate.add_argument("collection_word", nargs="?", metavar="COLLECTION", help=argparse.SUPPRESS)  # the older form
    gate.add_argument("--until", type=moment, help="RFC 3339 time the gate lifts itself")
    gate.add_argument("--reason", default="")
    add_yes(gate)  # drop asks first
    gate.set_defaults(run=guarded(_gate_checked))
    stats = verbs.add_parser("stats", parents=[parent], help="counts by state and priority, oldest due, start-lag")
    stats.add_argument("lambda_name", metavar="LAMBDA")
    stats.set_defaults(run=guarded(_stats))


def _gate_checked(args: argparse.Namespace) -> int:
    from atf_core.errors import InputError

    if args.action != "list" and not args.lambda_name:
        raise InputError(f"name a LAMBDA to {args.action}", "lambda")
    if args.collection_word is not None:  # `atf gate pause LAMBDA COLLECTION`, before --collection
        if args.collection is not None and args.collection != args.collection_word:
            raise InputError(
                f"two collections given: {args.collection_word} and --collection {args.collection}", "collection"
            )
        args.collection = args.collection_word
    return _gate(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="atf",
        description="Async task framework for AWS (tables need atf-sdk[cli]; --json does not)",
        parents=[common(where="atf")],
        epilog=EXITS,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    verbs = parser.add_subparsers(dest="verb", required=True)
    worker = verbs.add_parser("worker", help="run a worker host for the lambdas a module registers")
    worker.add_argument("lambdas", help="module:attribute of a Lambdas registry, e.g. examples.lambdas:lambdas")
    worker.add_argument("--config", type=Path, help=CONFIG_HELP)
    worker.add_argument("--executors", type=at_least_one, default=2, help="executor processes per lambda (default: 2)")
    worker.add_argument("--threads", type=at_least_one, default=4, help="threads per executor (default: 4)")
    worker.add_argument(
        "--only", action="append", help=f"serve only this lambda (repeatable; default: ${LAMBDA_ENV} if set, else all)"
    )
    worker.add_argument("--receive-wait", type=int, default=10, choices=range(1, 21), metavar="1-20",
                        help="SQS long-poll seconds (a stopping host waits for its polls in flight)")  # fmt: skip
    worker.add_argument(
        "--prefetch", type=int, default=0, choices=range(0, 101), metavar="0-100",
        help="messages a lambda receives beyond its idle threads (default 0: a busy host leaves them to idle "
        "hosts; more saves a receive per short task and holds that many behind running ones)",
    )  # fmt: skip
    worker.add_argument(
        "--metrics", choices=["auto", "emf", "off"], default="auto",
        help="CloudWatch EMF on stdout: auto (unless stdout is a terminal), emf (always) or off",
    )  # fmt: skip
    worker.add_argument("--health-file", type=Path, help=HEALTH_FILE_HELP)
    worker.set_defaults(run=_worker)
    health = verbs.add_parser(
        "worker-health", help="whether the worker host on this machine is healthy: one line; exit 0, else 1"
    )
    health.add_argument("--health-file", type=Path, help=HEALTH_FILE_HELP)
    health.set_defaults(run=_worker_health)
    _add_api_verbs(verbs)
    add_task_change_commands(verbs)
    add_dead_letters_command(verbs)
    add_schedules_command(verbs)
    add_chains_command(verbs)
    _add_optional_verbs(verbs)
    add_completion_command(verbs, build_parser)
    return parser


def _add_optional_verbs(verbs: Any) -> None:
    """Verbs that need what may not be installed: `atf top` (rich, the cli extra), and the
    verbs other installed packages declare under the `atf.commands` entry point (`atf cost`, from atf-local):
    each entry names a function that adds its verb to the subparsers."""
    # Whether rich is there is asked without importing it: atf_sdk.top, rich and all, loads when top runs.
    if importlib.util.find_spec("rich") is not None:
        add_top_command(verbs)
    else:  # rich, the cli extra: the verb says what to install
        # Any arguments are taken (none is an option here), so the answer is what to install.
        top = verbs.add_parser("top", help="a live view of a stack (needs atf-sdk[cli])", prefix_chars="+")
        top.add_argument("ignored", nargs="*", help=argparse.SUPPRESS)
        hint = install_hint("rich", "atf top")
        top.set_defaults(run=lambda args: _top_without_rich(top, hint, args.ignored))
    for entry in sorted(importlib.metadata.entry_points(group=COMMANDS_GROUP), key=lambda e: e.name):
        entry.load()(verbs)


def _top_without_rich(parser: argparse.ArgumentParser, hint: str, arguments: list[str]) -> int:
    if {"-h", "--help"} & set(arguments):  # asked what it is: say so, and what it needs
        print(f"{parser.format_usage().strip()}\n\n{hint}")
        return 0
    sys.exit(hint)


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int | None] = args.run
    try:
        code = run(args)
    except KeyboardInterrupt:  # Ctrl-C where a verb has no handling of its own (a starting host): no traceback
        sys.exit(INTERRUPTED)
    except BrokenPipeError:  # `atf ... --json | head`: the reader has gone, so nothing more to say to it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nor at exit, when Python flushes stdout
        sys.exit(1)
    except ModuleNotFoundError as missing:  # an optional part of atf-sdk that was not installed
        if extra_for(missing.name) is None:
            raise
        sys.exit(install_hint(missing.name, f"atf {args.verb}"))
    sys.exit(code or 0)


if __name__ == "__main__":
    main()
