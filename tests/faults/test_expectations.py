"""Each scenario fails when its fault never landed, and passes when it did.

A scenario that passes on a clean history (no signal, no fault) proves nothing about
its fault: these judge the scenarios on hand-made histories, both ways, and drive the
injection helpers with nothing to aim at."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any, cast

import pytest

from atf_local.faults import scenarios
from atf_local.faults.checker import check
from atf_local.faults.harness import judge
from atf_local.faults.injector import Injector
from atf_local.faults.model import FinalTask, Record
from atf_local.faults.scenarios import BUILDERS
from tests.faults.histories import (
    HARNESS,
    T0,
    bounds,
    clean_run,
    drained,
    fault,
    final,
    killed,
    partitioned,
    paused,
    write_run,
)

# What each scenario's verdict names when its fault is missing from the history
MISSING = {1: "SIGKILL", 2: "paused executor", 8: "partition", 11: "SIGTERM"}


def _judged(number: int, ci: bool, records: list[Record], tasks: dict[str, FinalTask], tmp_path: Path) -> list[str]:
    run = judge(BUILDERS[number](ci), write_run(tmp_path, records, tasks), bounds(), 1.0)
    return run.result.violations


@pytest.mark.parametrize("ci", [True, False], ids=["ci", "full"])
@pytest.mark.parametrize("number", sorted(MISSING))
def test_a_scenario_whose_fault_never_landed_fails(number: int, ci: bool, tmp_path: Path) -> None:
    violations = _judged(number, ci, clean_run(), final("a"), tmp_path)
    assert any(MISSING[number] in v for v in violations), violations


def _landed(number: int, ci: bool) -> tuple[list[Record], dict[str, FinalTask]]:
    if number == 1:
        return killed(2 if ci else 4)
    if number == 2:
        return paused(), final("a", attempt=2)
    if number == 8:
        return partitioned(), final("a", attempt=2)
    return drained({900: "host-a", 901: "host-b"}), final("a")


@pytest.mark.parametrize("ci", [True, False], ids=["ci", "full"])
@pytest.mark.parametrize("number", [1, 2, 11])
def test_a_scenario_whose_fault_landed_passes(number: int, ci: bool, tmp_path: Path) -> None:
    records, tasks = _landed(number, ci)
    assert _judged(number, ci, records, tasks, tmp_path) == []


def test_the_clocks_scenario_passes_once_the_partition_landed_and_in_full_its_kills(tmp_path: Path) -> None:
    records, tasks = _landed(8, ci=True)
    assert _judged(8, True, records, tasks, tmp_path / "ci") == []
    # The full size also kills two busy executors of host-b
    kills = [{"kind": "signal", "t": T0 + 20 + i, "pid": HARNESS, "target": 700 + i, "sig": int(signal.SIGKILL),
              "name": "SIGKILL", "injected": True} for i in range(2)]  # fmt: skip
    assert _judged(8, False, records + kills, tasks, tmp_path / "full") == []
    assert any("SIGKILL" in v for v in _judged(8, False, records, tasks, tmp_path / "no-kills"))


def test_a_late_result_of_another_process_or_a_refused_claim_is_not_the_held_write(tmp_path: Path) -> None:
    history = paused()
    refused = history[-2]
    elsewhere = [*history[:-2], {**refused, "pid": 999}, history[-1]]
    a_claim = [*history[:-2], {**refused, "transition": "claim"}, history[-1]]
    for records in (elsewhere, a_claim):
        assert any("paused executor" in v for v in _judged(2, True, records, final("a", attempt=2), tmp_path))


def test_a_sigtermed_host_that_never_exited_or_exited_unclean_fails(tmp_path: Path) -> None:
    history = drained({900: "host-a"})
    never = [r for r in history if r.get("event") != "gone"]
    unclean = [{**r, "code": -9} if r.get("event") == "gone" else r for r in history]
    assert any("never exited" in v for v in _judged(11, True, never, final("a"), tmp_path))
    assert any("exited with code -9" in v for v in _judged(11, True, unclean, final("a"), tmp_path))


def test_the_throttling_scenario_needs_a_fault_on_a_heartbeat(tmp_path: Path) -> None:
    elsewhere = [*clean_run(), *(fault("throttle", "dynamodb", T0 + 1 + i / 20) for i in range(10))]
    heartbeat = [*elsewhere, fault("throttle", "dynamodb_heartbeat", T0 + 2)]
    assert _judged(6, False, elsewhere, final("a"), tmp_path / "elsewhere") == [
        "only 0 throttle faults fired on dynamodb_heartbeat calls; the scenario needs 1"
    ]
    assert _judged(6, False, heartbeat, final("a"), tmp_path / "heartbeat") == []


def test_a_missed_injection_fails_the_run() -> None:
    history = [*clean_run(), {"kind": "missed", "t": T0 + 2, "pid": HARNESS, "what": "kill -9: nothing running"}]
    result = check(history, final("a"), bounds())
    assert result.violations == ["fault not injected: kill -9: nothing running"]


class _Nothing:
    """An injector with nothing to aim at: no busy executor, no host left, no condition ever met."""

    def __init__(self) -> None:
        self.missed_: list[str] = []
        self.sent: list[tuple[int, signal.Signals]] = []
        self.armed: list[str] = []
        self.cluster = self
        self.pid = None

    def get(self, name: str) -> _Nothing:
        return self

    def sleep(self, seconds: float) -> None:
        pass

    def busy_executor(self, host: str | None = None, timeout_s: float = 30.0) -> None:
        return None

    def wait_for(self, *args: Any, **kwargs: Any) -> bool:
        return False

    def missed(self, what: str) -> None:
        self.missed_.append(what)

    def signal(self, pid: int, sig: signal.Signals) -> None:
        self.sent.append((pid, sig))

    def arm(self, flag: str) -> None:
        self.armed.append(flag)

    def disarm(self, flag: str) -> None:
        pass

    def add_host(self, spec: Any) -> None:
        pass


@pytest.mark.parametrize(
    "inject, misses",
    [
        (lambda run: scenarios._kill_busy(run, 2, 1.0), 2),
        (lambda run: scenarios._pause_mid_run_and_mid_report(run, mid_run=True), 2),
        (lambda run: scenarios._partition_then_kill(run, 1), 2),
        (lambda run: scenarios._terminate_hosts(run, 1.0), 2),
    ],
    ids=["kill9", "sigstop", "clocks", "sigterm"],
)
def test_an_injection_with_nothing_to_aim_at_records_each_miss(inject: Any, misses: int) -> None:
    run = _Nothing()
    inject(cast(Injector, run))
    assert len(run.missed_) == misses, run.missed_
    assert run.sent == [] and "partition" not in run.armed


def test_a_pause_with_nothing_to_run_again_records_a_miss_and_never_stops_the_process() -> None:
    run = _Nothing()
    scenarios._pause(cast(Injector, run), 1234, [])
    assert run.sent == [] and run.missed_ == ["SIGSTOP: pid 1234 was running no task"]


def test_a_pause_whose_tasks_never_ran_again_records_a_miss() -> None:
    run = _Nothing()
    scenarios._pause(cast(Injector, run), 1234, [("a", 1)])
    assert [s for _, s in run.sent] == [signal.SIGSTOP, signal.SIGCONT]
    assert run.missed_ == ["SIGSTOP: the tasks of pid 1234 had not run again elsewhere after 60 s"]
