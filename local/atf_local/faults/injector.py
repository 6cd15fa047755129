"""What a scenario's fault injection can do while the workload runs: find a busy executor,
signal a process, add a host, open and close a fault window."""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable

from atf_local.faults.processes import HostSpec, add_host
from atf_local.faults.procs import Cluster
from atf_local.faults.tail import ExecKey, HistoryTail


class Injector:
    """Handed to a scenario's `inject` while the workload runs; `rng` is seeded with the run's seed."""

    def __init__(self, cluster: Cluster, seed: int) -> None:
        self.cluster = cluster
        self.seed = seed
        self.rng = random.Random(seed)
        self.tail = HistoryTail(cluster.history_dir)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def wait_for(self, done: Callable[[], bool], timeout_s: float, every_s: float = 0.2) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if done():
                return True
            time.sleep(every_s)
        return done()

    def busy_executor(self, host: str | None = None, timeout_s: float = 30.0) -> tuple[int, list[ExecKey]] | None:
        """An executor (of `host`) running a task right now, chosen with the run's seed."""
        found: list[tuple[int, list[ExecKey]]] = []

        def look() -> bool:
            busy = self.tail.busy_pids(self.cluster.executors(host))
            found[:] = sorted(busy.items())
            return bool(found)

        if not self.wait_for(look, timeout_s):
            return None
        return self.rng.choice(found)

    def missed(self, what: str) -> None:
        """Say in the history that a planned fault could not be aimed: the checker fails the run,
        since a scenario whose fault never landed proves nothing about it."""
        self.cluster.history.record("missed", what=what)

    def signal(self, pid: int, sig: signal.Signals) -> None:
        self.cluster.signal(pid, sig, injected=sig is not signal.SIGCONT)

    def add_host(self, spec: HostSpec) -> None:
        add_host(self.cluster, spec, self.seed)

    def arm(self, flag: str) -> None:
        """Open the faults of the rules that name this flag."""
        self.cluster.history.record("phase", name=f"armed {flag}")
        (self.cluster.run_dir / "flags" / flag).touch()

    def disarm(self, flag: str) -> None:
        (self.cluster.run_dir / "flags" / flag).unlink(missing_ok=True)
        self.cluster.history.record("phase", name=f"disarmed {flag}")
