"""How a scenario is described: its stack, processes, workload, faults and expectations."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from atf_local.faults.checker import Result
from atf_local.faults.injector import Injector
from atf_local.faults.model import FinalTask, Record
from atf_local.faults.processes import ConsumerSpec, HostSpec, Rules
from atf_local.faults.workload import Load

Expect = Callable[[Result, list[Record], dict[str, FinalTask]], list[str]]

# The timeouts of the test configuration: a 1 s heartbeat, leases of 10 s.
TIMEOUTS = {"enqueue": 15, "claim": 10, "heartbeat_interval": 1, "heartbeat": 10, "backoff_base": 0.5, "backoff_max": 2}
LAMBDAS: dict[str, dict[str, Any]] = {
    "steady": {"priorities": ["normal"], "default_priority": "normal", "max_attempts": 5},
    "slow": {"priorities": ["normal"], "default_priority": "normal", "max_attempts": 5},
    "poison": {"priorities": ["normal"], "default_priority": "normal", "max_attempts": 3},
    "noisy": {"priorities": ["normal"], "default_priority": "normal", "max_attempts": 3},
    "quiet": {"priorities": ["normal"], "default_priority": "normal", "max_attempts": 3},
}


@dataclass(frozen=True)
class Scenario:
    number: int
    key: str
    title: str
    lambdas: tuple[str, ...]
    loads: tuple[Load, ...]
    hosts: tuple[HostSpec, ...]
    consumers: tuple[ConsumerSpec, ...] = (ConsumerSpec(),)
    inject: Callable[[Injector], None] | None = None
    fault_window_s: float = 0.0  # the fault window stays open at least this long after the start
    drain_bound_s: float = 60.0
    watched: tuple[str, ...] = ()
    expect: tuple[Expect, ...] = ()  # guarantees this scenario adds: any miss fails it
    targets: tuple[Expect, ...] = ()  # performance targets: reported when missed, never a failure
    harness_faults: Rules = ()  # faults on the harness's own scheduling calls (the soak)
    ci: bool = False  # built at the CI sizes
    soak_minutes: float = 10.0  # the soak's length (the soak alone)
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def recipe(self) -> dict[str, Any]:
        """What builds this scenario again (atf_local.faults.__main__): run.json keeps it, so `check` can judge
        a kept run, `make test`'s included."""
        return {"number": self.number, "ci": self.ci, "soak_minutes": self.soak_minutes}

    def stack_config(self) -> dict[str, Any]:
        return {
            "name": "atf-faults",
            "table_name": "atf-faults-tasks",
            "shards": 2,
            "poll_interval": 0.5,
            "lookahead": 0.5,
            "max_in_flight_per_queue": 200,
            "timeouts": TIMEOUTS,
            "lambdas": {name: LAMBDAS[name] for name in self.lambdas},
        }
