"""run_scenario around a stand-in cluster: what it keeps for `check`, and its teardown.

No stack starts: the cluster, the wait for the stack and the drive are replaced, so
these run in well under a second and still go through run_scenario's own code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from atf_local.faults import harness
from atf_local.faults.__main__ import _build, main
from atf_local.faults.scenarios import BUILDERS
from atf_local.faults.spec import Scenario
from tests.faults.histories import T0, killed, write_run


class FakeCluster:
    """Records the teardown calls; `stop_all` raises what it is given, like a second Ctrl-C inside it."""

    interrupt: type[BaseException] | None = None
    calls: list[str] = []

    def __init__(self, run_dir: Path, *_: Any) -> None:
        self.run_dir = run_dir
        FakeCluster.calls = []

    def add(self, *_: Any) -> None:
        pass

    def stop_all(self) -> None:
        FakeCluster.calls.append("stop_all")
        if self.interrupt is not None:
            raise self.interrupt

    def kill_leftovers(self) -> None:
        FakeCluster.calls.append("kill_leftovers")


@pytest.fixture
def fake_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    """Instead of a run: scenario 1's kills, as they land at the CI size (two), in the history."""

    def drive(scenario: Scenario, cluster: FakeCluster, *_: Any) -> tuple[float, float]:
        records, tasks = killed(2)
        write_run(cluster.run_dir, records, tasks)
        return T0 + 3, T0 + 4

    monkeypatch.setattr(harness, "Cluster", FakeCluster)
    monkeypatch.setattr(harness, "template_for", lambda config: None)
    monkeypatch.setattr(harness, "_ready", lambda *_: None)
    monkeypatch.setattr(harness, "_drive", drive)
    monkeypatch.setattr(harness, "_snapshot", lambda *_: None)
    monkeypatch.setattr(FakeCluster, "interrupt", None)


@pytest.mark.usefixtures("fake_stack")
def test_a_ci_run_kept_by_make_test_can_be_judged_again(tmp_path: Path) -> None:
    # As tests/faults/test_scenarios.py runs it: the scenario built at the CI size, nothing else said
    outcome = harness.run_scenario(BUILDERS[1](True), tmp_path, seed=1)
    assert outcome.result.ok, outcome.result.violations
    # Judged again at the CI size (two kills suffice); at the full size it would need four and fail
    assert main(["check", str(outcome.run_dir)]) == 0


def test_a_run_kept_without_its_recipe_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text('{"recipe": {}, "bounds": {}, "seconds": 1}')
    with pytest.raises(SystemExit, match="does not say how the scenario was built"):
        main(["check", str(tmp_path)])


@pytest.mark.parametrize("ci", [True, False], ids=["ci", "full"])
@pytest.mark.parametrize("number", sorted(BUILDERS))
def test_every_scenario_is_built_again_from_its_recipe(number: int, ci: bool) -> None:
    scenario = BUILDERS[number](ci)
    again = _build(scenario.recipe)
    assert (again.recipe, again.title, again.loads, again.hosts) == (
        {"number": number, "ci": ci, "soak_minutes": 10.0}, scenario.title, scenario.loads, scenario.hosts,
    )  # fmt: skip


@pytest.mark.usefixtures("fake_stack")
@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
def test_a_second_interrupt_during_teardown_still_kills_the_leftovers(
    interrupt: type[BaseException], tmp_path: Path
) -> None:
    FakeCluster.interrupt = interrupt
    with pytest.raises(interrupt):
        harness.run_scenario(BUILDERS[1](True), tmp_path, seed=1)
    assert FakeCluster.calls == ["stop_all", "kill_leftovers"]
