"""The CI-sized fault scenarios, run for real inside `make test`.

Each starts a fresh local stack (moto's server on loopback), consumers and
worker hosts as separate processes, runs a bounded workload under one fault,
waits for the backlog to drain and checks the history: any lost task,
overlapping executions, applied stale write, changed terminal state, or a
drain over the stated bound fails the test. The full suite, with the soak:
`python -m atf_local.faults run` (see docs/guarantees.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from atf_local.faults.harness import run_scenario
from atf_local.faults.scenarios import BUILDERS, CI_SUBSET


@pytest.mark.stack
@pytest.mark.timeout(420)
@pytest.mark.parametrize("number", CI_SUBSET, ids=[BUILDERS[n](True).key for n in CI_SUBSET])
def test_the_guarantees_hold_under_the_fault(number: int, tmp_path: Path) -> None:
    outcome = run_scenario(BUILDERS[number](True), tmp_path, seed=number)
    result = outcome.result
    assert (result.lost, result.overlaps) == (0, 0), result.violations
    assert result.ok, result.violations
    assert result.tasks > 0 and result.executions >= result.tasks
