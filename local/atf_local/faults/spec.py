"""How a scenario is described: its stack, processes, workload, faults and expectations."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atf_local.faults.checker import Result
from atf_local.faults.model import FinalTask, Record
from atf_local.faults.workload import Load
from atf_local.instruments.faults import FAULTS_ENV

if TYPE_CHECKING:
    from atf_local.faults.harness import Run

Rules = tuple[dict[str, Any], ...]
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
LAMBDAS_SPEC = "atf_local.faults.lambdas:lambdas"


@dataclass(frozen=True)
class Faults:
    """Fault rules for a process (see atf_local.instruments.faults): `rules` for every life of it,
    or `lives[i]` for its i-th life only. A rule is armed while its flag file exists
    (its "flag", by default "window": the fault window the harness opens after the
    warm-up and closes when it heals the faults)."""

    rules: Rules = ()
    lives: tuple[Rules, ...] = ()

    def env(self, seed: int, incarnation: int, flags: Path) -> dict[str, str]:
        if self.lives:
            chosen = list(self.lives[incarnation]) if incarnation < len(self.lives) else []
        else:
            chosen = list(self.rules)
        rules = [
            {**{k: v for k, v in rule.items() if k != "flag"}, "while_exists": str(flags / rule.get("flag", "window"))}
            for rule in chosen
        ]
        if not rules:
            return {}
        return {FAULTS_ENV: json.dumps({"seed": seed * 1000 + incarnation, "rules": rules})}


@dataclass(frozen=True)
class HostSpec:
    name: str
    executors: int = 1
    threads: int = 2
    only: tuple[str, ...] = ()
    offset_s: float = 0.0
    faults: Faults = Faults()
    restart: bool = True


@dataclass(frozen=True)
class ConsumerSpec:
    name: str = "consumer"
    group: int = 0
    groups: int = 1
    offset_s: float = 0.0
    faults: Faults = Faults()
    restart: bool = True


@dataclass(frozen=True)
class Scenario:
    number: int
    key: str
    title: str
    lambdas: tuple[str, ...]
    loads: tuple[Load, ...]
    hosts: tuple[HostSpec, ...]
    consumers: tuple[ConsumerSpec, ...] = (ConsumerSpec(),)
    inject: Callable[[Run], None] | None = None
    fault_window_s: float = 0.0  # the fault window stays open at least this long after the start
    drain_bound_s: float = 60.0
    watched: tuple[str, ...] = ()
    expect: tuple[Expect, ...] = ()  # guarantees this scenario adds: any miss fails it
    targets: tuple[Expect, ...] = ()  # performance targets: reported when missed, never a failure
    harness_faults: Rules = ()  # faults on the harness's own scheduling calls (the soak)
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

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
