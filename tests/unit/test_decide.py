"""The consumer's decision for one due entry, as data: every branch without an AWS."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from atf_core import lifecycle
from atf_core.config import StackConfig
from atf_core.consumer.decide import (
    INDEX_LAG_MS,
    Drop,
    Enqueue,
    Exhaust,
    Expire,
    Look,
    Requeue,
    Send,
    Wait,
    decide,
    record_and_send,
    recover,
    send_unrecorded,
)
from atf_core.definitions import Attr
from atf_core.schema import Gate, GateAction, Task, TaskStatus, to_ms
from atf_core.store.base import DueEntry
from tests.builders import NOW, a_task

NOW_MS = to_ms(NOW)


def _task(status: TaskStatus = TaskStatus.NEW, attempt: int = 0, lambda_name: str = "work", **times: datetime) -> Task:
    return a_task(NOW - timedelta(minutes=5), status=status, attempt=attempt, lambda_=lambda_name, **times)


def _look(task: Task | None, **facts: object) -> Look:
    lambda_name = task.lambda_ if task else "work"
    next_ms = facts.pop("next_ms", NOW_MS - 1000)
    entry = DueEntry("t1", lambda_name, "c", "normal", next_ms, expire_ms=facts.pop("expire_ms", None))  # type: ignore[arg-type]
    return Look(entry, task, NOW, **facts)  # type: ignore[arg-type]


def _gate(action: GateAction, reason: str = "") -> Gate:
    return Gate(lambda_="work", collection=None, action=action, reason=reason, created_at=NOW)


# -- the first look -------------------------------------------------------------------------
def test_a_task_past_its_expire_at_expires_before_any_gate_or_mode(config: StackConfig) -> None:
    look = _look(_task(), expire_ms=NOW_MS, gate=_gate(GateAction.DROP))
    assert decide(look, config, send_unrecorded) == Expire()
    assert decide(look, config, record_and_send) == Expire()


def test_a_drop_gate_drops_and_says_which_gate(config: StackConfig) -> None:
    look = _look(_task(), expire_ms=NOW_MS + 1, gate=_gate(GateAction.DROP, "bad deploy"))
    assert decide(look, config, send_unrecorded) == Drop("dropped by gate work/*: bad deploy")
    assert decide(_look(_task(), gate=_gate(GateAction.DROP)), config, send_unrecorded) == Drop(
        "dropped by gate work/*"
    )


@pytest.mark.parametrize("later_ms", [1, 400])
def test_a_drop_gate_leaves_a_task_read_ahead_until_its_run_time(config: StackConfig, later_ms: int) -> None:
    # The gate in force then drops it: one lifted meanwhile must not have dropped it already
    look = _look(_task(), next_ms=NOW_MS + later_ms, gate=_gate(GateAction.DROP))
    assert decide(look, config, send_unrecorded) == Wait(NOW_MS + later_ms)


def test_a_pause_gate_is_not_the_decisions_business(config: StackConfig) -> None:
    # (paused collections are filtered out of the index query; a paused lambda is not polled at all)
    assert decide(_look(_task(), gate=_gate(GateAction.PAUSE)), config, send_unrecorded) == Send(0)


def test_recording_consumers_enqueue_what_is_due_by_the_lookahead(config: StackConfig) -> None:
    due_by = NOW + timedelta(seconds=config.lookahead)
    assert decide(_look(None), config, record_and_send) == Enqueue(due_by)


def test_the_default_mode_sends_a_waiting_task_at_its_attempt(config: StackConfig) -> None:
    assert decide(_look(_task(TaskStatus.RETRIABLE_FAILURE, attempt=2)), config, send_unrecorded) == Send(2)


def test_a_task_not_yet_visible_is_looked_at_next_poll(config: StackConfig) -> None:
    assert decide(_look(None), config, send_unrecorded) == Wait(NOW_MS + int(config.poll_interval * 1000))


def test_a_task_sent_less_than_an_enqueue_timeout_ago_is_not_sent_again(config: StackConfig) -> None:
    timeout_ms = int(config.timeouts.enqueue * 1000)
    recent = _look(_task(), sent_ms=NOW_MS - timeout_ms + 1)
    assert decide(recent, config, send_unrecorded) == Wait(NOW_MS + 1)
    assert decide(_look(_task(), sent_ms=NOW_MS - timeout_ms), config, send_unrecorded) == Send(0)


def test_an_unrecorded_consumer_recovers_a_task_it_finds_in_flight(config: StackConfig) -> None:
    claimed = _look(_task(TaskStatus.CLAIMED, attempt=1, claimed_at=NOW), watched_since_ms=NOW_MS)
    assert decide(claimed, config, send_unrecorded) == recover(claimed, config)


# -- recovery ---------------------------------------------------------------------------------
@pytest.mark.parametrize("status", [None, TaskStatus.SUCCESS, TaskStatus.NEW, TaskStatus.RETRIABLE_FAILURE])
def test_a_finished_waiting_or_missing_task_is_looked_at_once_the_index_caught_up(
    config: StackConfig, status: TaskStatus | None
) -> None:
    look = _look(None if status is None else _task(status))
    assert recover(look, config) == Wait(NOW_MS + INDEX_LAG_MS)


def test_an_enqueued_task_is_requeued_at_its_enqueue_deadline(config: StackConfig) -> None:
    timeout = timedelta(seconds=config.timeouts.enqueue)
    on_time = _task(TaskStatus.ENQUEUED, enqueued_at=NOW - timeout + timedelta(seconds=1))
    assert recover(_look(on_time), config) == Wait(NOW_MS + 1000)
    late = _task(TaskStatus.ENQUEUED, enqueued_at=NOW - timeout)
    assert recover(_look(late), config) == Requeue(0, {Attr.ENQUEUED: to_ms(NOW - timeout)}, None)


def test_a_silent_executor_is_presumed_dead_only_after_its_deadline_and_the_lease_floor(config: StackConfig) -> None:
    timeouts = config.timeouts
    beat = NOW - timedelta(seconds=timeouts.heartbeat)  # the heartbeat deadline passes now
    task = _task(TaskStatus.PROCESSING, attempt=1, claimed_at=beat, heartbeat_at=beat)
    floor_ms = int(timeouts.lease_floor * 1000)
    # watched unchanged for less than the lease floor on this consumer's clock: not yet
    assert recover(_look(task, watched_since_ms=NOW_MS - floor_ms + 1), config) == Wait(NOW_MS + 1)
    action = recover(_look(task, watched_since_ms=NOW_MS - floor_ms), config)
    assert isinstance(action, Requeue) and action.observed == {Attr.HEARTBEAT: to_ms(beat)}
    assert action.error is not None and action.error.type == "LostExecution" and action.error.attempt == 1


def test_a_lost_last_attempt_ends_the_task_or_dead_letters_it(config: StackConfig) -> None:
    beat = NOW - timedelta(seconds=config.timeouts.heartbeat)
    floor_ms = int(config.timeouts.lease_floor * 1000)
    for lambda_name, ending in (("work", lifecycle.EXHAUST), ("sleepy", lifecycle.EXHAUST_TO_DEAD_LETTER)):
        task = _task(TaskStatus.PROCESSING, attempt=3, lambda_name=lambda_name, claimed_at=beat, heartbeat_at=beat)
        action = recover(_look(task, watched_since_ms=NOW_MS - floor_ms), config)
        assert isinstance(action, Exhaust) and action.transition is ending, lambda_name
        assert action.attempt == 3 and action.reason.startswith("attempt 3 of 3 was lost")


def test_a_claimed_task_never_started_is_requeued_after_the_claim_timeout(config: StackConfig) -> None:
    claimed_at = NOW - timedelta(seconds=config.timeouts.claim)
    task = _task(TaskStatus.CLAIMED, attempt=1, claimed_at=claimed_at)
    floor_ms = int(config.timeouts.lease_floor * 1000)
    action = recover(_look(task, watched_since_ms=NOW_MS - floor_ms), config)
    assert isinstance(action, Requeue) and action.observed == {Attr.CLAIMED: to_ms(claimed_at)}
    assert action.error is not None and "no start recorded" in action.error.message
