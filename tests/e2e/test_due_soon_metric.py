"""The look-ahead metric as the local stack's consumer processes publish it: each group its own shards."""

from __future__ import annotations

import select
import subprocess
import sys
import time
from datetime import timedelta

from aws_lambda_powertools.shared import constants

from atf_core.schema import ScheduleRequest, utcnow
from atf_core.tasks import Scheduling
from atf_core.telemetry import Metric
from atf_local.environment import REPO
from tests.e2e.conftest import RunningStack
from tests.telemetry.emf import named


def first_due_soon(process: subprocess.Popen[str], timeout_s: float = 60) -> dict[str, float]:
    """The TasksDueSoon values of the first documents a consumer process prints, by lambda."""
    assert process.stdout is not None
    deadline, seen = time.monotonic() + timeout_s, ""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], 1.0)
        if ready:
            seen += process.stdout.readline()
            due = {p.dimensions["lambda"]: p.total for p in named(seen, Metric.TASKS_DUE_SOON)}
            if len(due) == 2:
                return due
    raise AssertionError(f"no TasksDueSoon for both lambdas within {timeout_s} s; output:\n{seen[-2000:]}")


def test_the_consumer_groups_publish_counts_that_add_up_to_the_tasks_due_soon(stack: RunningStack) -> None:
    scheduling = Scheduling(stack.store, stack.config)
    soon = (utcnow() + timedelta(seconds=120)).isoformat()
    for _ in range(7):
        scheduling.schedule(ScheduleRequest.model_validate({"lambda": "work", "run_at": soon}))
    scheduling.schedule(ScheduleRequest.model_validate({"lambda": "sleepy", "run_at": soon}))

    env = {**stack.env("consumer"), constants.METRICS_DISABLED_ENV: "false"}
    groups = [
        subprocess.Popen(
            [sys.executable, "-m", "atf_local", "consumer", "--group", str(i), "--groups", "2"],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    try:
        counts = [first_due_soon(process) for process in groups]
    finally:
        for process in groups:
            process.terminate()
            process.wait(timeout=30)
    assert {name: counts[0][name] + counts[1][name] for name in ("work", "sleepy")} == {"work": 7, "sleepy": 1}
