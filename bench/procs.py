"""Processes of one benchmark run: the local stack, the frontend API, a worker host.

Every process starts in its own session and is stopped by its process group,
so nothing outlives a run; CPU time comes from /proc/<pid>/stat.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from atf_core.config import StackConfig
from atf_local.environment import REPO, component_environment, local_environment, point_at
from atf_local.iam.roles import WORKER
from atf_local.iam.template import template_for
from atf_local.instruments.history import HISTORY_ENV
from atf_local.process_tree import children_of, executors_of, fork_servers_of
from atf_local.stack import free_port, wait_for_port
from bench.meter import METER_ENV

HOOK = Path(__file__).resolve().parent / "hook"
TICKS = os.sysconf("SC_CLK_TCK")


def bench_config(shards: int = 2, lookahead: float = 1.0) -> StackConfig:
    """The bench's stack: poll every second, send up to `lookahead` early (1 s; the local example,
    examples/stack.json, has 2 s), 2 shards, 200 in flight per queue, one no-op lambda."""
    return StackConfig.model_validate(
        {
            "name": "bench",
            "table_name": "bench-tasks",
            "shards": shards,
            "poll_interval": 1.0,
            "lookahead": lookahead,
            "max_in_flight_per_queue": 200,
            "timeouts": {"enqueue": 30, "claim": 10, "heartbeat_interval": 1, "heartbeat": 10},
            "lambdas": {"noop": {"priorities": ["normal"], "max_attempts": 3}},
        }
    )


@dataclass
class Stack:
    """moto's server with the consumer, the frontend API and one worker host, each metered."""

    config: StackConfig
    workdir: Path
    # 16 slots: under load a claim and a result take ~0.4 s on moto, so 8 slots would cap the run
    # near 17 tasks/s (latency, not the backend); 16 keep the backend itself the bound.
    executors: int = 4
    threads: int = 4
    receive_wait: int = 10
    extra_env: dict[str, str] = field(default_factory=dict)
    aws_port: int = field(default_factory=free_port)
    api_port: int = field(default_factory=free_port)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _unpoint: Callable[[], None] | None = field(default=None, repr=False)  # puts the endpoint variables back

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.aws_port}"

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def meter_dir(self) -> Path:
        return self.workdir / "meter"

    @property
    def history_dir(self) -> Path:
        return self.workdir / "history"

    def env(self, history: bool = False, component: str | None = None) -> dict[str, str]:
        """A process's environment; a `component`'s holds its role's credentials (atf_local.iam)."""
        config = self.config.model_dump_json()
        env = (
            component_environment(self.endpoint, config, component)
            if component
            else local_environment(self.endpoint, config)
        )
        # Every process imports the framework from the checkout this benchmark runs from.
        paths = [HOOK, REPO, REPO / "layers", REPO / "sdk", REPO / "local"]
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in paths)
        env[METER_ENV] = str(self.meter_dir)
        env.pop(HISTORY_ENV, None)
        if history:
            env[HISTORY_ENV] = str(self.history_dir)
        return {**env, **self.extra_env}

    def start(self) -> None:
        self.meter_dir.mkdir(parents=True, exist_ok=True)
        template_for(self.config)  # a first synthesis (tens of seconds) before the wait for the stack starts
        config_path = self.workdir / "stack.json"
        config_path.write_text(self.config.model_dump_json())
        serve = ["-m", "atf_local", "serve", "--config", str(config_path), "--aws-port", str(self.aws_port),
                 "--consumers", "1", "--api-port", "0"]  # fmt: skip
        self._spawn("stack", serve, self.env(history=True))
        wait_for_port(self.aws_port, timeout_s=60)
        # This process's own calls (the raw loop, the waits) go to each service's server until the stack stops.
        self._unpoint = point_at(self.endpoint)
        self._wait_for_queues()
        self._spawn(
            "frontend", ["-m", "bench.api_process", "--port", str(self.api_port)], self.env(component="frontend")
        )
        wait_for_port(self.api_port, timeout_s=60)
        worker = ["-m", "atf_sdk.cli", "worker", "bench.lambdas:lambdas", "--config", str(config_path),
                  "--executors", str(self.executors), "--threads", str(self.threads),
                  "--receive-wait", str(self.receive_wait)]  # fmt: skip
        self._spawn("host", worker, self.env(history=True, component=WORKER))

    def _spawn(self, name: str, args: list[str], env: dict[str, str]) -> None:
        log = (self.workdir / f"{name}.log").open("ab")
        self.procs[name] = subprocess.Popen(
            [sys.executable, *args], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def _wait_for_queues(self, timeout_s: float = 60) -> None:
        from atf_core.aws import make_clients

        sqs = make_clients(self.endpoint).sqs
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if len(sqs.list_queues().get("QueueUrls", [])) >= 2:
                return
            time.sleep(0.2)
        raise TimeoutError("the local stack did not provision its queues")

    def stop(self, names: tuple[str, ...] | None = None) -> None:
        """SIGTERM (the host drains), then SIGKILL for any group still alive after 30 s."""
        chosen = [n for n in (names or tuple(self.procs)[::-1]) if n in self.procs]
        if "stack" in chosen and self._unpoint is not None:
            self._unpoint()
            self._unpoint = None
        for name in chosen:
            _signal_group(self.procs[name], signal.SIGTERM)
        for name in chosen:
            process = self.procs.pop(name)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                _signal_group(process, signal.SIGKILL)
                process.wait(timeout=10)
            _signal_group(process, signal.SIGKILL)  # children the leader left behind

    def components(self) -> dict[str, list[int]]:
        """pids of each component: moto's servers, consumer, frontend, controller, executors."""
        stack, host = self.procs["stack"].pid, self.procs["host"].pid if "host" in self.procs else None
        children = children_of(stack)
        servers = [p for p in children if b"atf_local.servers" in _cmdline(p)]  # the SQS server (atf_local.servers)
        found = {"embedded AWS (moto)": [stack, *servers], "consumer": [p for p in children if p not in servers]}
        if "frontend" in self.procs:
            found["frontend"] = [self.procs["frontend"].pid]
        if host is not None:
            found["controller"] = [host]
            # The executors and the fork server they fork from (it imported their modules once for all of them)
            found["executors"] = fork_servers_of(host) + executors_of(host)
        return found

    def cpu(self) -> dict[str, float]:
        return {name: sum(cpu_seconds(p) for p in pids) for name, pids in self.components().items()}

    def bills(self) -> dict[int, dict[str, object]]:
        found = {}
        for path in self.meter_dir.glob("*.json"):
            try:
                found[int(path.stem)] = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
        return found


@contextmanager
def running(stack: Stack) -> Iterator[Stack]:
    try:
        stack.start()
        yield stack
    finally:
        stack.stop()


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with suppress(ProcessLookupError):
        os.killpg(process.pid, sig)


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
