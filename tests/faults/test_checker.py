"""The checker on hand-made histories: it passes a clean run and flags each
kind of violation (a checker that cannot fail proves nothing)."""

from __future__ import annotations

import signal
from pathlib import Path

from atf_local.faults.checker import check
from atf_local.faults.model import load_records
from tests.faults.histories import (
    CONTROLLER,
    OTHER_EXECUTOR,
    T0,
    accepted,
    bounds,
    claim,
    clean_run,
    end,
    final,
    gone,
    sent,
    start,
    write,
)


def test_a_clean_run_passes() -> None:
    result = check(clean_run(), final("a"), bounds())
    assert result.ok, result.violations
    assert (result.tasks, result.executions, result.lost, result.overlaps, result.duplicates) == (1, 1, 0, 0, 0)
    assert abs(result.max_start_lag_s - 1.1) < 1e-9


def test_a_task_missing_from_the_table_is_lost() -> None:
    result = check(clean_run(), {}, bounds())
    assert result.lost == 1
    assert any(v.startswith("lost: task a") for v in result.violations)


def test_an_unfinished_task_out_of_the_index_is_lost_but_one_still_scheduled_is_not() -> None:
    history = [accepted("a"), write("a", "enqueue", None, "applied", "enqueued", 0, T0 + 1, pid=50)]
    lost = check(history, final("a", "enqueued", 0, indexed=False), bounds())
    scheduled = check(history, final("a", "retriable_failure", 1, indexed=True), bounds())
    assert lost.lost == 1 and not lost.ok
    assert scheduled.lost == 0 and scheduled.unfinished == 1


def test_a_backlog_that_drains_late_or_never_is_flagged() -> None:
    late = check(clean_run(), final("a"), bounds(drained_t=T0 + 3 + 45))
    never = check(clean_run(), final("a"), bounds(drained_t=None))
    assert any("over the 30s bound" in v for v in late.violations)
    assert any("not drained" in v for v in never.violations)


def test_two_executions_running_at_once_overlap() -> None:
    # The first execution never wrote its result; its process lived on until t0+20.
    history = [
        *clean_run()[:4],
        claim("a", 2, T0 + 14),
        start("a", 2, T0 + 15, pid=OTHER_EXECUTOR),
        write("a", "succeed", 2, "applied", "success", 2, T0 + 16, pid=OTHER_EXECUTOR),
        end("a", 2, T0 + 16, pid=OTHER_EXECUTOR),
        gone(200, T0 + 20),
    ]
    result = check(history, final("a", attempt=2), bounds())
    assert result.overlaps == 1
    assert any("overlap: task a attempt 1" in v for v in result.violations)


def test_an_execution_ends_when_its_process_dies() -> None:
    history = [
        *clean_run()[:4],
        gone(200, T0 + 5),
        claim("a", 2, T0 + 14),
        start("a", 2, T0 + 15, pid=OTHER_EXECUTOR),
        write("a", "succeed", 2, "applied", "success", 2, T0 + 16, pid=OTHER_EXECUTOR),
        end("a", 2, T0 + 16, pid=OTHER_EXECUTOR),
    ]
    result = check(history, final("a", attempt=2), bounds())
    assert result.ok, result.violations
    assert result.duplicates == 1  # run again without having asked for it


def test_a_run_after_a_loss_its_host_recorded_was_asked_for_by_no_one_but_one_after_a_retriable_failure_was() -> None:
    def run_after(error_type: str) -> int:
        failed = write("a", "fail_retriable", 1, "applied", "retriable_failure", 1, T0 + 5, pid=CONTROLLER)
        history = [
            *clean_run()[:4],
            gone(200, T0 + 5),
            {**failed, "error_type": error_type},
            claim("a", 2, T0 + 7),
            start("a", 2, T0 + 8, pid=OTHER_EXECUTOR),
            write("a", "succeed", 2, "applied", "success", 2, T0 + 9, pid=OTHER_EXECUTOR),
            end("a", 2, T0 + 9, pid=OTHER_EXECUTOR),
        ]
        result = check(history, final("a", attempt=2), bounds())
        assert result.ok, result.violations
        return result.duplicates

    # A killed executor's attempt, recorded as lost by its host: its re-run is the fault's, as after a lapsed lease
    assert run_after("LostExecution") == 1
    # A callback's failure asks for its retry
    assert run_after("RuntimeError") == 0


def test_paused_time_does_not_count_but_running_after_the_pause_does() -> None:
    def run(second_ends: float) -> list[int]:
        history = [
            *clean_run()[:4],
            sent(200, signal.SIGSTOP, T0 + 2),
            claim("a", 2, T0 + 14),
            start("a", 2, T0 + 15, pid=OTHER_EXECUTOR),
            end("a", 2, second_ends, pid=OTHER_EXECUTOR),
            sent(200, signal.SIGCONT, T0 + 30),
            write("a", "succeed", 1, "rejected", "success", 2, T0 + 30.2),
            end("a", 1, T0 + 30.3),
        ]
        return [check(history, final("a", attempt=2), bounds()).overlaps]

    assert run(second_ends=T0 + 20) == [0]
    assert run(second_ends=T0 + 31) == [1]


def test_a_result_that_landed_proves_the_callback_had_returned() -> None:
    # The end record came late, but the retriable failure had landed before attempt 2 was claimed.
    history = [
        *clean_run()[:4],
        write("a", "fail_retriable", 1, "applied", "retriable_failure", 1, T0 + 2),
        claim("a", 2, T0 + 2.5),
        start("a", 2, T0 + 2.6, pid=OTHER_EXECUTOR),
        end("a", 1, T0 + 2.7),
        write("a", "succeed", 2, "applied", "success", 2, T0 + 3, pid=OTHER_EXECUTOR),
        end("a", 2, T0 + 3.1, pid=OTHER_EXECUTOR),
    ]
    result = check(history, final("a", attempt=2), bounds())
    assert result.ok, result.violations
    assert (result.overlaps, result.duplicates) == (0, 0)


def test_an_applied_stale_write_is_flagged_and_a_rejected_one_counted() -> None:
    applied = [*clean_run(), write("a", "heartbeat", 1, "applied", "processing", 2, T0 + 9)]
    rejected = [*clean_run(), write("a", "heartbeat", 1, "rejected", "success", 2, T0 + 9)]
    flagged = check(applied, final("a"), bounds())
    counted = check(rejected, final("a"), bounds())
    assert flagged.stale_applied == 1
    assert any(v.startswith("stale write applied") for v in flagged.violations)
    assert counted.ok and counted.stale_rejected == 1


def test_a_changed_terminal_state_is_flagged() -> None:
    reopened = check(clean_run(), final("a", status="processing"), bounds())
    twice = [*clean_run(), write("a", "fail_fatal", 1, "applied", "fatal_failure", 1, T0 + 5, writer="other")]
    ended_twice = check(twice, final("a", status="fatal_failure"), bounds())
    assert any("terminal state changed" in v for v in reopened.violations)
    assert any("ended 2 times" in v for v in ended_twice.violations)


def test_an_unfenced_write_and_an_unclaimed_execution_are_flagged() -> None:
    history = [*clean_run(), write("a", "heartbeat", None, "applied", "processing", 1, T0 + 2.2)]
    unclaimed = [r for r in clean_run() if r.get("transition") != "claim"]
    assert any(v.startswith("unfenced write") for v in check(history, final("a"), bounds()).violations)
    assert any(v.startswith("unclaimed execution") for v in check(unclaimed, final("a"), bounds()).violations)


def test_one_attempt_run_twice_is_flagged() -> None:
    history = [*clean_run(), start("a", 1, T0 + 5, pid=OTHER_EXECUTOR), end("a", 1, T0 + 6, pid=OTHER_EXECUTOR)]
    result = check(history, final("a"), bounds())
    assert any(v.startswith("attempt run twice") for v in result.violations)


def test_a_line_cut_short_by_a_kill_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "executor-1.jsonl").write_text('{"kind": "start", "t": 1.0}\n{"kind": "end", "t"')
    assert [r["kind"] for r in load_records(tmp_path)] == ["start"]
