"""A host whose executor threads are all busy leaves the queue's messages to hosts with idle threads (found by
a user round: one host received three long tasks for its two threads while another host sat idle, and the
third started six seconds late)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from atf_core.schema import TaskStatus
from tests.e2e.conftest import RunningStack
from tests.e2e.test_worker_host import Host, finished, schedule

ROUNDS = 4
SECONDS = 3.0  # each task's run: a task held behind another on a busy host would start this late


@pytest.mark.parametrize(
    "delay_s",
    [0.0, 2.0],
    ids=["due now", "due later (sent ahead by the consumer: a host may receive both while its thread is idle)"],
)
def test_long_tasks_spread_over_hosts_with_idle_threads(
    stack: RunningStack, worker_host: Host, tmp_path: Path, delay_s: float
) -> None:
    # Given two hosts of one executor thread each
    for name in ("a", "b"):
        worker_host(executors=1, threads=1, log=tmp_path / f"host-{name}.log")
    for round_ in range(ROUNDS):
        # When two long tasks are due at once, each round
        tasks = [schedule(stack, payload={"seconds": SECONDS}, delay_seconds=delay_s) for _ in range(2)]
        done = stack.wait_for([t.id for t in tasks], finished, timeout_s=4 * SECONDS + 20)
        # Then each ran on its own host, both starting within a second or so of their time, not one after the other
        assert {t.status for t in done} == {TaskStatus.SUCCESS}
        lags = [(t.first_claimed_at or t.scheduled_at) - t.scheduled_at for t in done]
        assert max(lags) < timedelta(seconds=SECONDS - 1), f"round {round_}: start lags {lags}"
        assert len({t.claimed_by for t in done}) == 2, "two executors: one on each host (each has one)"
