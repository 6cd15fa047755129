"""The offline checker: does a run's history keep the guarantees?

Checks, each reported as violations (any violation fails the run):
- none lost: every accepted task is terminal, or still in the index (scheduled);
- the backlog drained within the stated bound after the faults healed;
- no two executions of one task overlap in time (an execution without an end
  record ends when its process died; paused time does not count as running);
  an earlier execution whose own result write was applied had returned from
  its callback before that write, hence before any later attempt was claimed;
- every execution ran an attempt that a claim produced, and no attempt ran twice;
- every write of a fenced transition named an attempt, and no write for an
  attempt other than the task's current one was applied (stale ones rejected);
- terminal states never change: at most one terminal write lands per task,
  and the table still holds it at the end;
- every fault the scenario planned was aimed: the injection recorded no miss
  (a run whose fault never landed would pass without testing anything).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from atf_core.lifecycle import TRANSITIONS
from atf_core.schema import LOST_EXECUTION, TERMINAL_STATUSES
from atf_core.telemetry import percentile
from atf_local.faults.model import (
    CONT,
    Execution,
    FinalTask,
    Lives,
    Record,
    active_intervals,
    executions,
    lives,
    load_final,
    load_records,
    of_kind,
    overlap_s,
)

# Where a task's life ends: terminal, or parked for an operator (no run redrives a dead letter).
TERMINAL = frozenset({s.value for s in TERMINAL_STATUSES} | {"dead_letter", "expired"})
FENCED = frozenset(t.name for t in TRANSITIONS if t.fenced)


@dataclass(frozen=True)
class Bounds:
    """What the harness states for one run."""

    healed_t: float  # when the last fault was lifted and the workload had been scheduled
    drained_t: float | None  # when every accepted task was found finished (None: never)
    ended_t: float  # when the harness stopped the processes
    drain_bound_s: float
    watched: tuple[str, ...] = ()  # lambdas whose start-lag is reported (all if empty)


@dataclass
class Result:
    tasks: int = 0
    executions: int = 0
    faults: int = 0
    lost: int = 0
    unfinished: int = 0
    duplicates: int = 0
    overlaps: int = 0
    stale_rejected: int = 0
    stale_applied: int = 0
    reconciled: int = 0
    fenced_writes: int = 0
    writes: int = 0
    max_start_lag_s: float = 0.0
    p95_start_lag_s: float = 0.0
    drain_s: float = 0.0
    executor_exits: int = 0
    lag_by_lambda: dict[str, float] = field(default_factory=dict)  # max start-lag of each lambda
    violations: list[str] = field(default_factory=list)
    missed_targets: list[str] = field(default_factory=list)  # performance targets, not guarantees

    @property
    def ok(self) -> bool:
        return not self.violations

    def violate(self, message: str) -> None:
        self.violations.append(message)


def check_run(run_dir: Path, bounds: Bounds) -> tuple[Result, list[Record], dict[str, FinalTask]]:
    records = load_records(run_dir / "history")
    final = load_final(run_dir / "final.json")
    return check(records, final, bounds), records, final


def check(records: list[Record], final: dict[str, FinalTask], bounds: Bounds) -> Result:
    result = Result()
    accepted = {r["task"]: r for r in of_kind(records, "accepted")}
    result.tasks = len(accepted)
    result.faults = (
        len(of_kind(records, "fault"))
        + sum(1 for r in of_kind(records, "signal") if r.get("injected"))
        + sum(1 for r in of_kind(records, "exit") if r.get("reason") == "poison")  # a callback that kills its process
    )
    runs = executions(records)
    result.executions = len(runs)
    life = lives(records, bounds.ended_t)
    writes = of_kind(records, "write")
    _lost(result, accepted, final, bounds)
    _overlaps(result, runs, life)
    _claims(result, runs, writes)
    _fencing(result, writes)
    _terminals(result, writes, final)
    _duplicates(result, runs, writes)
    _start_lag(result, accepted, runs, bounds.watched)
    result.executor_exits = _executor_exits(records)
    for missed in of_kind(records, "missed"):
        result.violate(f"fault not injected: {missed['what']}")
    return result


def _executor_exits(records: list[Record]) -> int:
    """Executors that ended on their own before the teardown: heartbeat guards, crashes, poison."""
    signalled = {int(r["target"]) for r in of_kind(records, "signal") if r.get("sig") != CONT}
    return sum(
        1
        for r in of_kind(records, "proc")
        if r.get("event") == "gone"
        and r.get("role") == "executor"
        and not r.get("teardown")
        and int(r["target"]) not in signalled
    )


def _lost(result: Result, accepted: dict[str, Record], final: dict[str, FinalTask], bounds: Bounds) -> None:
    for task_id in sorted(accepted):
        task = final.get(task_id)
        if task is None or (task.status not in TERMINAL and not task.indexed):
            result.lost += 1
            result.violate(f"lost: task {task_id} is {task.status if task else 'missing from the table'}")
        elif task.status not in TERMINAL:
            result.unfinished += 1
    if bounds.drained_t is None:
        result.drain_s = bounds.ended_t - bounds.healed_t
        result.violate(f"backlog not drained: {result.unfinished} tasks unfinished {result.drain_s:.0f}s after healing")
        return
    result.drain_s = max(0.0, bounds.drained_t - bounds.healed_t)
    if result.drain_s > bounds.drain_bound_s:
        result.violate(
            f"backlog drained in {result.drain_s:.1f}s after healing, over the {bounds.drain_bound_s:.0f}s bound"
        )


def _overlaps(result: Result, runs: list[Execution], life: Lives) -> None:
    by_task: dict[str, list[Execution]] = defaultdict(list)
    for run in runs:
        by_task[run.task].append(run)
    for task_id, task_runs in by_task.items():
        task_runs.sort(key=lambda r: (r.attempt, r.start))
        spans = [active_intervals(r, life) for r in task_runs]
        for i, earlier in enumerate(task_runs):
            for j in range(i + 1, len(task_runs)):
                later = task_runs[j]
                if earlier.result_applied and later.attempt > earlier.attempt:
                    continue  # its callback returned before its result landed, before `later` was claimed
                seconds = overlap_s(spans[i], spans[j])
                if seconds > 0:
                    result.overlaps += 1
                    result.violate(
                        f"overlap: task {task_id} attempt {earlier.attempt} (pid {earlier.pid}) and attempt "
                        f"{later.attempt} (pid {later.pid}) ran together for {seconds:.2f}s"
                    )


def _claims(result: Result, runs: list[Execution], writes: list[Record]) -> None:
    claimed = {
        (w["task"], int(w["current_attempt"]))
        for w in writes
        if w["transition"] == "claim" and w["result"] == "applied" and w.get("current_attempt") is not None
    }
    seen: set[tuple[str, int]] = set()
    for run in runs:
        key = (run.task, run.attempt)
        if key not in claimed:
            result.violate(f"unclaimed execution: task {run.task} attempt {run.attempt} ran without a claim")
        if key in seen:
            result.violate(f"attempt run twice: task {run.task} attempt {run.attempt}")
        seen.add(key)


def _fencing(result: Result, writes: list[Record]) -> None:
    for write in writes:
        result.writes += 1
        name, attempt, current = write["transition"], write.get("attempt"), write.get("current_attempt")
        result.reconciled += bool(write.get("reconciled"))
        if name not in FENCED:
            continue
        if attempt is None:
            result.violate(f"unfenced write: {name} on task {write['task']} named no attempt")
            continue
        result.fenced_writes += 1
        if current is None:
            continue
        if write["result"] == "rejected" and attempt < current:
            result.stale_rejected += 1
        expected = attempt + 1 if name == "claim" else attempt
        if write["result"] == "applied" and current != expected:
            result.stale_applied += 1
            result.violate(
                f"stale write applied: {name} for attempt {attempt} on task {write['task']} left attempt {current}"
            )


def _terminals(result: Result, writes: list[Record], final: dict[str, FinalTask]) -> None:
    landed: dict[str, dict[str, str]] = defaultdict(dict)  # task -> writer -> terminal status
    for write in writes:
        if write["result"] == "applied" and write.get("status") in TERMINAL:
            landed[write["task"]][write["writer"]] = write["status"]
    for task_id, by_writer in landed.items():
        statuses = list(by_writer.values())
        now = final.get(task_id)
        if len(statuses) > 1:
            result.violate(f"terminal state changed: task {task_id} ended {len(statuses)} times: {statuses}")
        elif now is not None and now.status != statuses[0]:
            result.violate(f"terminal state changed: task {task_id} ended {statuses[0]}, is now {now.status}")


def _duplicates(result: Result, runs: list[Execution], writes: list[Record]) -> None:
    """Executions beyond those the task asked for (its first, plus one per retriable failure that landed). An
    execution lost to a fault asked for none, whether the consumer found it through its lease or its host
    recorded the loss (a LostExecution failure)."""
    asked: dict[str, set[str]] = defaultdict(set)
    for write in writes:
        lost = write.get("error_type") == LOST_EXECUTION
        if write["transition"] == "fail_retriable" and write["result"] == "applied" and not lost:
            asked[write["task"]].add(write["writer"])
    counts: dict[str, int] = defaultdict(int)
    for run in runs:
        counts[run.task] += 1
    result.duplicates = sum(max(0, n - 1 - len(asked[task])) for task, n in counts.items())


def _start_lag(result: Result, accepted: dict[str, Record], runs: list[Execution], watched: tuple[str, ...]) -> None:
    first: dict[str, float] = {}
    for run in runs:
        first[run.task] = min(first.get(run.task, run.start), run.start)
    for task, record in accepted.items():
        if task in first:
            lag = max(0.0, first[task] - float(record["scheduled_t"]))
            result.lag_by_lambda[record["lambda"]] = max(lag, result.lag_by_lambda.get(record["lambda"], 0.0))
    lags = sorted(
        first[task] - float(record["scheduled_t"])
        for task, record in accepted.items()
        if task in first and (not watched or record["lambda"] in watched)
    )
    if lags:
        result.max_start_lag_s = max(0.0, lags[-1])
        result.p95_start_lag_s = max(0.0, percentile(lags, 0.95))
