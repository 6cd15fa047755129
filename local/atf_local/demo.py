"""make run: the local stack, a worker host with the example lambdas, a demo mix of
tasks scheduled through the SDK, a periodic schedule and a two-link chain, and each
task's state live until all are done. IAM is enforced: every component runs under its role."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from atf_core.chains import ChainStatus
from atf_core.config import StackConfig
from atf_core.errors import AtfError
from atf_core.schema import Task, TaskStatus, utcnow
from atf_local import environment
from atf_local.environment import REPO
from atf_local.iam.roles import WORKER
from atf_local.servers import freeze_survivors
from atf_local.stack import LocalStack, free_port
from atf_sdk.client import AtfClient

STYLE = {
    TaskStatus.NEW: "dim",
    TaskStatus.ENQUEUED: "cyan",
    TaskStatus.CLAIMED: "blue",
    TaskStatus.PROCESSING: "bold blue",
    TaskStatus.RETRIABLE_FAILURE: "yellow",
    TaskStatus.SUCCESS: "green",
    TaskStatus.FATAL_FAILURE: "bold red",
    TaskStatus.CANCELLED: "magenta",
    TaskStatus.DROPPED: "magenta",
    TaskStatus.EXPIRED: "magenta",
    TaskStatus.DEAD_LETTER: "bold red",
    TaskStatus.WAITING: "dim",
}
RESUME_AFTER_S = 8.0
# A resume releases held tasks within a consumer poll and a worker host's gate refresh (2 s): a margin on top.
STARTS_AFTER_RESUME_S = 5.0
TIMEOUT_S = 120.0


@dataclass
class DemoTask:
    label: str
    expect: TaskStatus
    request: dict[str, Any]
    id: str = ""


def demo_mix() -> list[DemoTask]:
    greet = "greet"
    mix = [
        DemoTask("immediate", TaskStatus.SUCCESS, {"lambda_name": greet, "payload": {"name": "now"}}),
        DemoTask(
            "delayed 5 s", TaskStatus.SUCCESS, {"lambda_name": greet, "payload": {"name": "later"}, "delay_seconds": 5}
        ),
        DemoTask(
            "fails twice, then succeeds", TaskStatus.SUCCESS, {"lambda_name": "flaky", "payload": {"succeed_on": 3}}
        ),
        DemoTask(
            "fails fatally: a dead letter", TaskStatus.DEAD_LETTER, {"lambda_name": "charge", "payload": {"amount": -5}}
        ),
    ]
    for priority in ("low", "normal", "high"):
        for n in range(2):
            body = {"name": f"{priority}-{n}", "seconds": 0.5}
            request = {"lambda_name": greet, "payload": body, "priority": priority, "delay_seconds": 2}
            mix.append(DemoTask(f"priority {priority} #{n + 1}", TaskStatus.SUCCESS, request))
    for n in range(2):
        request = {
            "lambda_name": greet,
            "payload": {"name": f"reader {n}"},
            "collection": "newsletter",
            "delay_seconds": n,
        }
        mix.append(DemoTask(f"paused collection #{n + 1}", TaskStatus.SUCCESS, request))
    return mix


@dataclass
class Extras:
    """A periodic schedule and a two-link chain: the consumer's housekeeping and the chain's re-index, so a
    grant the deployed roles lack shows on the first run. `problems` says what went wrong, denials included."""

    schedule: str = "demo-every-2s"
    # The first task seen fired: the schedule's newest is made up to a lookahead before its time, so it is
    # mostly still waiting, and a demo that waited for the newest to succeed waited on a race (up to a minute).
    first_fired: str = ""
    chain_id: str = ""
    state: str = ""
    problems: list[str] = field(default_factory=list)
    settled: bool = False

    def start(self, client: AtfClient) -> None:
        try:
            client.put_schedule(self.schedule, {"lambda": "greet", "payload": {"name": "periodic"}, "every_seconds": 2})
            first = {"name": "first", "lambda": "greet", "payload": {"name": "chain link 1"}}
            second = {"name": "second", "lambda": "greet", "payload": {"name": "chain link 2"}, "after": ["first"]}
            self.chain_id = client.create_chain({"links": [first, second]}).id
        except AtfError as error:
            self._failed("starting the schedule and the chain", error)

    def poll(self, client: AtfClient) -> None:
        if self.settled:
            return
        try:
            schedule = client.get_schedule(self.schedule, upcoming=0)
            self.first_fired = self.first_fired or schedule.last_task_id or ""
            fired = client.get(self.first_fired).status if self.first_fired else None
            chain = client.get_chain(self.chain_id)
        except AtfError as error:
            self._failed("reading the schedule and the chain", error)
            return
        self.state = f"schedule fired {schedule.fired}x (first: {fired or '-'}); chain {chain.status}"
        self.settled = fired is TaskStatus.SUCCESS and chain.status is not ChainStatus.RUNNING
        if self.settled and chain.status is not ChainStatus.SUCCEEDED:
            self.problems.append(f"the chain ended {chain.status}")

    def finish(self, client: AtfClient) -> None:
        if not self.settled and not self.problems:
            self.problems.append(f"the schedule and the chain did not finish: {self.state}")
        with contextlib.suppress(AtfError):
            client.delete_schedule(self.schedule)

    def _failed(self, doing: str, error: AtfError) -> None:
        self.problems.append(f"{doing}: {error} (the frontend's log above names a denied action)")
        self.settled = True


def _port(preferred: int) -> int:
    with socket.socket() as probe:
        return preferred if probe.connect_ex(("127.0.0.1", preferred)) != 0 else free_port()


def run_demo(config: StackConfig, aws_port: int, api_port: int = 8080) -> None:
    console = Console(width=None if sys.stdout.isatty() else 140)
    freeze_survivors()  # this process serves DynamoDB, as `atf_local serve`'s does
    stack = LocalStack(config, aws_port=_port(aws_port), api_port=_port(api_port), console_port=_port(8081))
    console.print(f"[bold]Starting the local stack[/] (AWS on {stack.endpoint}, API on {stack.api_url})")
    stack.start()
    try:  # a host that never reports ready, or a Ctrl-C, stops the host and the stack all the same
        if stack.console_url:
            console.print(f"Web console: {stack.console_url}")
        log = Path(REPO / ".demo-worker.log")
        host = _start_worker_host(stack, log)
        try:
            _wait_for_line(log, "worker host ready", timeout_s=90)
            console.print(f"Worker host started (pid {host.pid}); its log: {log}")
            ok = _drive(AtfClient(stack.api_url), console)
        finally:
            host.send_signal(signal.SIGTERM)
            host.wait(timeout=60)
    finally:
        stack.stop()
    sys.exit(0 if ok else 1)


def _start_worker_host(stack: LocalStack, log: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "atf_sdk.cli", "worker", "examples.lambdas:lambdas", "--receive-wait", "1"]
    env = environment.component_environment(stack.endpoint, stack.config.model_dump_json(), WORKER)
    with log.open("wb") as out:
        return subprocess.Popen(command, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)


def _wait_for_line(log: Path, needle: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while needle not in log.read_text(errors="replace"):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{needle!r} did not appear in {log}")
        time.sleep(0.1)


def _drive(client: AtfClient, console: Console) -> bool:
    events: list[str] = []
    client.pause("greet", "newsletter")
    events.append("paused greet/newsletter")
    mix = demo_mix()
    for task in mix:
        task.id = client.schedule(**task.request).id
    events.append(f"scheduled {len(mix)} tasks through the API")
    extras = Extras()
    extras.start(client)
    events.append(f"a schedule every 2 s ({extras.schedule}) and a two-link chain")
    started = time.monotonic()
    resumed_at: datetime | None = None
    with Live(console=console, refresh_per_second=4) as live:
        while True:
            tasks = {t.id: client.get(t.id) for t in mix}
            elapsed = time.monotonic() - started
            if resumed_at is None and elapsed > RESUME_AFTER_S:
                resumed_at = utcnow()
                client.resume("greet", "newsletter")
                events.append(f"resumed greet/newsletter after {elapsed:.0f} s")
            extras.poll(client)
            live.update(_view(mix, tasks, [*events, extras.state], elapsed))
            if (all(_settled(t) for t in tasks.values()) and extras.settled) or elapsed > TIMEOUT_S:
                break
            time.sleep(0.25)
    wrong = [t.label for t in mix if tasks[t.id].status is not t.expect]
    lines, late = _late_after_resume(mix, tasks, resumed_at)
    console.print()
    for line in lines:
        console.print(line)
    wrong += late
    extras.finish(client)
    console.print(f"Schedule and chain: {extras.state}")
    wrong += extras.problems
    console.print("[green]All tasks reached their expected states.[/]" if not wrong else f"[red]Unexpected: {wrong}[/]")
    return not wrong


def _late_after_resume(
    mix: list[DemoTask], tasks: dict[str, Task], resumed_at: datetime | None
) -> tuple[list[str], list[str]]:
    """How long after the resume each task of the paused collection started, and which were late."""
    lines, late = [], []
    for item in (t for t in mix if t.request.get("collection") == "newsletter"):
        claimed = tasks[item.id].claimed_at
        after = (claimed - resumed_at).total_seconds() if claimed and resumed_at else None
        lines.append(
            f"{item.label}: " + ("never started" if after is None else f"started {after:.1f} s after the resume")
        )
        if after is None or after > STARTS_AFTER_RESUME_S:
            late.append(f"{item.label} (not started within {STARTS_AFTER_RESUME_S:g} s of the resume)")
    return lines, late


def _settled(task: Task) -> bool:
    return task.status.terminal or task.status is TaskStatus.DEAD_LETTER


def _view(mix: list[DemoTask], tasks: dict[str, Task], events: list[str], elapsed: float) -> Group:
    table = Table(title=f"ATF demo - {elapsed:.1f} s", expand=False)
    for column in ("task", "lambda", "priority", "collection", "status", "attempt", "start lag", "last error"):
        table.add_column(column)
    for item in mix:
        task = tasks[item.id]
        first_start = task.claimed_at if task.attempt == 1 else None
        lag = f"{(first_start - task.scheduled_at).total_seconds():.2f} s" if first_start else ""
        error = task.last_error.message if task.last_error else ""
        table.add_row(
            item.label, task.lambda_, task.priority, task.collection,
            Text(task.status.value, style=STYLE[task.status]), str(task.attempt), lag, error[:40],
        )  # fmt: skip
    return Group(table, Text("\n".join(f"- {e}" for e in events), style="dim"))
