"""Scenario-specific expectations, on top of the checker's universal ones.

Each takes the checker's result, the history and the final table, and
returns violations: what this scenario promises beyond "nothing lost,
nothing run twice at once".
"""

from __future__ import annotations

from collections import Counter

from atf_local.faults.checker import Result
from atf_local.faults.model import FinalTask, Record, of_kind
from atf_local.faults.spec import Expect


def no_duplicates(result: Result, records: list[Record], final: dict[str, FinalTask]) -> list[str]:
    return [f"{result.duplicates} duplicate executions; this fault must not cause any"] if result.duplicates else []


def no_executor_exits(result: Result, records: list[Record], final: dict[str, FinalTask]) -> list[str]:
    if result.executor_exits:
        return [f"{result.executor_exits} executors ended themselves: injected errors must not cause self-termination"]
    return []


def _hosts_gone(records: list[Record]) -> list[Record]:
    return [r for r in of_kind(records, "proc") if r.get("role") == "host" and r["event"] == "gone"]


def hosts_survive(result: Result, records: list[Record], final: dict[str, FinalTask]) -> list[str]:
    dead = [r for r in _hosts_gone(records) if not r.get("teardown")]
    return [f"worker host {r['name']} (pid {r['target']}) died with code {r.get('code')}" for r in dead]


def hosts_exit_cleanly(result: Result, records: list[Record], final: dict[str, FinalTask]) -> list[str]:
    unclean = [r for r in _hosts_gone(records) if r.get("code") != 0]
    return [f"worker host {r['name']} exited with code {r.get('code')} after SIGTERM" for r in unclean]


def faults_fired(kind: str, at_least: int) -> Expect:
    def check(result: Result, records: list[Record], final: dict[str, FinalTask]) -> list[str]:
        fired = sum(1 for r in of_kind(records, "fault") if r.get("fault") == kind)
        return [f"only {fired} {kind} faults fired; the scenario needs {at_least}"] if fired < at_least else []

    return check


def all_succeed(lambda_name: str) -> Expect:
    def check(result: Result, records: list[Record], final: dict[str, FinalTask]) -> list[str]:
        failed = [t for t in final.values() if t.lambda_name == lambda_name and t.status != "success"]
        return [f"task {t.id} ended {t.status} at attempt {t.attempt}; it never fails by itself" for t in failed]

    return check


def reconciled_some(result: Result, records: list[Record], final: dict[str, FinalTask]) -> list[str]:
    return [] if result.reconciled else ["no write reconciled: the lost responses were never exercised"]


def poison_bounded(lambda_name: str) -> Expect:
    """Each poison task ran exactly max_attempts times and ended fatal_failure."""

    def check(result: Result, records: list[Record], final: dict[str, FinalTask]) -> list[str]:
        runs = Counter(r["task"] for r in of_kind(records, "start"))
        problems = []
        for task in (t for t in final.values() if t.lambda_name == lambda_name):
            ended = task.status in ("fatal_failure", "dead_letter")
            if not ended or (task.attempt, runs[task.id]) != (task.max_attempts, task.max_attempts):
                problems.append(
                    f"poison task {task.id}: {task.status} at attempt {task.attempt} after {runs[task.id]} "
                    f"executions; expected a dead letter or fatal_failure after exactly {task.max_attempts}"
                )
        return problems

    return check


def start_lag_within(seconds: float) -> Expect:
    def check(result: Result, records: list[Record], final: dict[str, FinalTask]) -> list[str]:
        if result.max_start_lag_s > seconds:
            return [f"watched start-lag reached {result.max_start_lag_s:.1f}s, over {seconds:.0f}s"]
        return []

    return check


def stale_writes_rejected(result: Result, records: list[Record], final: dict[str, FinalTask]) -> list[str]:
    return [] if result.stale_rejected else ["no stale write was attempted: the pause never outlived a lease"]
