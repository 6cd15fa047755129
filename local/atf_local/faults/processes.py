"""The processes of a scenario, consumers and worker hosts: how each is described, with its
faults and clock offset, and how the harness starts it in the cluster."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from atf_local.faults.procs import Cluster, python_argv
from atf_local.instruments.faults import FAULTS_ENV
from atf_local.instruments.startup import CLOCK_OFFSET_ENV

Rules = tuple[dict[str, Any], ...]
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


def add_consumer(cluster: Cluster, spec: ConsumerSpec, seed: int) -> None:
    argv = python_argv("-m", "atf_local", "consumer", "--group", str(spec.group), "--groups", str(spec.groups))

    def env_for(incarnation: int) -> dict[str, str]:
        return {**offset_env(spec.offset_s), **spec.faults.env(seed, incarnation, cluster.run_dir / "flags")}

    cluster.add(spec.name, "consumer", argv, env_for, restart=spec.restart)


def add_host(cluster: Cluster, spec: HostSpec, seed: int) -> None:
    argv = python_argv(
        "-m", "atf_sdk.cli", "worker", LAMBDAS_SPEC, "--config", str(cluster.run_dir / "stack.json"),
        "--executors", str(spec.executors), "--threads", str(spec.threads), "--receive-wait", "1",
    )  # fmt: skip
    for name in spec.only:
        argv += ["--only", name]

    def env_for(incarnation: int) -> dict[str, str]:
        return {**offset_env(spec.offset_s), **spec.faults.env(seed, incarnation, cluster.run_dir / "flags")}

    cluster.add(spec.name, "host", argv, env_for, restart=spec.restart)


def offset_env(seconds: float) -> dict[str, str]:
    return {CLOCK_OFFSET_ENV: str(seconds)} if seconds else {}
