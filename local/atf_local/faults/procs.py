"""The local stack as real OS processes, watched and signalled by the harness.

Every process gets its own session, so a kill of its group reaches whatever
it started, and every one is stopped when the run ends. A monitor thread
records in the history when each process (executors included: the children of
a host's fork server, found through /proc) appears and when it is gone,
restarts supervised processes that died, and so lets the checker end an
execution that wrote no end record at the latest moment its process can have
been alive.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from atf_local.environment import REPO, component_environment, local_environment
from atf_local.iam.roles import WORKER
from atf_local.instruments.history import HISTORY_ENV, History
from atf_local.instruments.startup import HOOK_DIR
from atf_local.process_tree import executors_of

EnvFor = Callable[[int], dict[str, str]]  # extra environment for the nth incarnation
# Whose credentials each kind of process runs with
COMPONENTS = {"consumer": "consumer", "host": WORKER}


@dataclass
class Managed:
    name: str
    role: str  # stack | consumer | host
    argv: list[str]
    env_for: EnvFor
    restart: bool
    incarnation: int = 0
    popen: subprocess.Popen[bytes] | None = None
    all_popens: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None and self.popen.poll() is None else None


class Cluster:
    """The processes of one run."""

    def __init__(self, run_dir: Path, endpoint: str, config_json: str, history: History) -> None:
        self.run_dir = run_dir
        self.endpoint = endpoint
        self._config_json = config_json
        self.history = history
        self.history_dir = run_dir / "history"
        self._procs: dict[str, Managed] = {}
        self._watched: dict[int, tuple[str, str]] = {}  # pid -> (role, owner name)
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self.tearing_down = False
        self._monitor = threading.Thread(target=self._watch, name="monitor", daemon=True)

    # -- starting ----------------------------------------------------------------
    def add(self, name: str, role: str, argv: list[str], env_for: EnvFor, restart: bool = False) -> Managed:
        managed = Managed(name, role, argv, env_for, restart)
        with self._lock:
            self._procs[name] = managed
            self._launch(managed)
        return managed

    def _launch(self, managed: Managed) -> None:
        component = COMPONENTS.get(managed.role)  # the stack itself starts as the operator
        if component is None:
            env = local_environment(self.endpoint, self._config_json)
        else:
            env = component_environment(self.endpoint, self._config_json, component)
        # The start-up hook attaches the history recorder, and the faults and clock offset env_for asks for
        hook_path = [str(HOOK_DIR), *filter(None, [env.get("PYTHONPATH")])]
        env.update({HISTORY_ENV: str(self.history_dir), "PYTHONPATH": os.pathsep.join(hook_path)})
        env["PYTHONUNBUFFERED"] = "1"
        env.update(managed.env_for(managed.incarnation))
        log = (self.run_dir / "logs" / f"{managed.name}-{managed.incarnation}.log").open("ab")
        popen = subprocess.Popen(
            managed.argv, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        managed.popen = popen
        managed.all_popens.append(popen)
        self._watched[popen.pid] = (managed.role, managed.name)
        self.history.record("proc", event="up", target=popen.pid, role=managed.role, name=managed.name,
                            incarnation=managed.incarnation)  # fmt: skip

    def start_monitor(self) -> None:
        self._monitor.start()

    # -- looking -----------------------------------------------------------------
    def get(self, name: str) -> Managed:
        return self._procs[name]

    def executors(self, host: str | None = None) -> list[int]:
        with self._lock:
            return [
                pid for pid, (role, owner) in self._watched.items()
                if role == "executor" and (host is None or owner == host) and _alive(pid)
            ]  # fmt: skip

    def signal(self, pid: int, sig: signal.Signals, injected: bool = True) -> None:
        """Signal one process and say so in the history (the checker places deaths and pauses by it)."""
        self.history.record("signal", target=pid, sig=int(sig), name=sig.name, injected=injected)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)

    # -- the monitor -------------------------------------------------------------
    def _watch(self) -> None:
        while not self._stop.wait(0.1):
            with self._lock:
                self._find_executors()
                self._reap()

    def _find_executors(self) -> None:
        for managed in self._procs.values():
            pid = managed.pid
            if managed.role != "host" or pid is None:
                continue
            for child in executors_of(pid):
                if child not in self._watched:
                    self._watched[child] = ("executor", managed.name)
                    self.history.record("proc", event="up", target=child, role="executor", name=managed.name)

    def _reap(self) -> None:
        for pid, (role, name) in list(self._watched.items()):
            managed = self._procs.get(name)
            root = managed is not None and managed.popen is not None and managed.popen.pid == pid
            gone = managed.popen.poll() is not None if root and managed and managed.popen else not _alive(pid)
            if not gone:
                continue
            del self._watched[pid]
            code = managed.popen.returncode if root and managed is not None and managed.popen else None
            self.history.record(
                "proc", event="gone", target=pid, role=role, name=name, code=code, teardown=self.tearing_down
            )
            if root and managed is not None and managed.restart and not self.tearing_down:
                managed.incarnation += 1
                self._launch(managed)

    # -- stopping ----------------------------------------------------------------
    def stop_all(self, grace_s: float = 30.0) -> None:
        """Hosts first (SIGTERM drains them), then consumers, then the stack; whatever lingers is killed."""
        self.tearing_down = True
        for role in ("host", "consumer", "stack"):
            members = [m for m in self._procs.values() if m.role == role]
            for managed in members:
                if managed.pid is not None:
                    self.signal(managed.pid, signal.SIGTERM, injected=False)
            deadline = time.monotonic() + grace_s
            for managed in members:
                for popen in managed.all_popens:
                    _wait_or_kill(popen, deadline)
        time.sleep(0.3)  # let the monitor see the last executors go
        self._stop.set()
        if self._monitor.is_alive():
            self._monitor.join(timeout=5)
        self.kill_leftovers()

    def kill_leftovers(self) -> None:
        popens = [popen for managed in self._procs.values() for popen in managed.all_popens]
        # Every group is killed before any wait, so an interrupt during the waits leaves nothing running.
        for popen in popens:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(popen.pid, signal.SIGKILL)  # the group: orphaned executors too
        for popen in popens:
            with contextlib.suppress(subprocess.TimeoutExpired):
                popen.wait(timeout=5)


def _wait_or_kill(popen: subprocess.Popen[bytes], deadline: float) -> None:
    try:
        popen.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(timeout=5)


def _alive(pid: int) -> bool:
    """Running or stopped; a zombie is dead (its parent has not reaped it yet)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def python_argv(*args: str) -> list[str]:
    return [sys.executable, *args]
