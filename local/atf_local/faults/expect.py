"""Scenario-specific expectations, on top of the checker's universal ones.

Each takes the checker's result, the history and the final table, and
returns violations: what this scenario promises beyond "nothing lost,
nothing run twice at once".
"""

from __future__ import annotations

import signal
from collections import Counter

from atf_local.faults.checker import Result
from atf_local.faults.model import RESULT_TRANSITIONS, FinalTask, Record, executions, of_kind
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


def _injected(records: list[Record], sig: signal.Signals) -> list[Record]:
    return [r for r in of_kind(records, "signal") if r.get("injected") and int(r["sig"]) == int(sig)]


def signals_sent(sig: signal.Signals, at_least: int) -> Expect:
    """The harness sent at least this many of `sig`: the fault the scenario is named after happened."""

    def check(result: Result, records: list[Record], final: dict[str, FinalTask]) -> list[str]:
        sent = len(_injected(records, sig))
        return [f"only {sent} {sig.name} sent; the scenario needs {at_least}"] if sent < at_least else []

    return check


def hosts_exit_cleanly(result: Result, records: list[Record], final: dict[str, FinalTask]) -> list[str]:
    """Every host sent SIGTERM drained and exited 0; a run that sent none proves nothing of the drain."""
    terminated = {int(r["target"]) for r in _injected(records, signal.SIGTERM)}
    if not terminated:
        return ["no worker host was sent SIGTERM: the drain was never exercised"]
    gone = {int(r["target"]): r for r in _hosts_gone(records)}
    problems = [f"worker host pid {pid} was sent SIGTERM and never exited" for pid in sorted(terminated - set(gone))]
    unclean = [r for r in gone.values() if r.get("code") != 0]
    return problems + [f"worker host {r['name']} exited with code {r.get('code')} after SIGTERM" for r in unclean]


def faults_fired(kind: str, at_least: int, client: str | None = None) -> Expect:
    """At least this many `kind` faults fired, on the calls of `client` (an AwsClients field) if named."""

    def check(result: Result, records: list[Record], final: dict[str, FinalTask]) -> list[str]:
        fired = sum(
            1 for r in of_kind(records, "fault") if r.get("fault") == kind and client in (None, r.get("client"))
        )
        on = f" on {client} calls" if client else ""
        return [f"only {fired} {kind} faults fired{on}; the scenario needs {at_least}"] if fired < at_least else []

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


def paused_result_refused(result: Result, records: list[Record], final: dict[str, FinalTask]) -> list[str]:
    """A result write of a paused executor went out after its task had moved on, and was refused.

    Any stale write counts in `stale_rejected`, claims from re-sent messages included; this
    is the one scenario 2 holds back on purpose."""
    stopped: dict[int, float] = {}
    for r in _injected(records, signal.SIGSTOP):
        stopped.setdefault(int(r["target"]), float(r["t"]))
    refused = [
        w for w in of_kind(records, "write")
        if w["transition"] in RESULT_TRANSITIONS and w["result"] == "rejected"
        and int(w["pid"]) in stopped and float(w["t"]) > stopped[int(w["pid"])]
        and w.get("current_attempt") is not None and int(w.get("attempt") or 0) < int(w["current_attempt"])
    ]  # fmt: skip
    return [] if refused else ["no late result write of a paused executor was refused: the held write never landed"]


def partitioned_tasks_reran(host: str, flag: str) -> Expect:
    """A task running on `host` when the `flag` fault was armed ran again (a later attempt started) after that."""

    def check(result: Result, records: list[Record], final: dict[str, FinalTask]) -> list[str]:
        armed = [float(r["t"]) for r in of_kind(records, "phase") if r.get("name") == f"armed {flag}"]
        if not armed:
            return [f"the {flag} fault was never armed"]
        began = armed[0]
        pids = {
            int(r["target"]) for r in of_kind(records, "proc")
            if r.get("event") == "up" and r.get("role") == "executor" and r.get("name") == host
        }  # fmt: skip
        runs = executions(records)
        cut = {(r.task, r.attempt) for r in runs if r.pid in pids and r.start < began and (r.end or began) >= began}
        again = [r for r in runs if r.start >= began and any(r.task == t and r.attempt > a for t, a in cut)]
        return [] if again else [f"no task running on {host} when the {flag} began ran again: it cut nothing off"]

    return check
