"""A paced bulk cancel stops within its run's budget, not after it: a write whose turn at the drip rate comes
past the budget is not waited for, and the answer says more remain (the caller calls again). It slept up to
the turn first, so a slow rate held one request far past API Gateway's 29 s, and the client gave up while the
cancels went on. And the console lists the gates in force only, as the API does."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from atf_core.bulk import RUN_BUDGET_S, BulkChanges, task_filter
from atf_core.config import StackConfig
from atf_core.gating import Gating
from atf_core.schema import GateAction, ScheduleRequest, TaskStatus, utcnow
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling
from atf_local.console.data import ConsoleData


def test_a_paced_cancel_answers_within_its_budget_with_more_to_come(aws: Any, config: StackConfig) -> None:
    # Given three waiting tasks of a collection, to be cancelled one every 50 s
    store = DynamoTaskStore(aws.dynamodb, config)
    request = ScheduleRequest.model_validate({"lambda": "work", "collection": "paced", "delay_seconds": 3000})
    tasks = [Scheduling(store, config).schedule(request).task for _ in range(3)]
    slept: list[float] = []
    bulk = BulkChanges(store, config, sleep=slept.append)
    selection = task_filter("work", "paced", None, None, None, False, 10, None)
    # When the cancel runs
    result = bulk.cancel(selection, dry_run=False, per_second=0.02)
    # Then it cancelled the first, waited for no turn past its budget, and says more remain
    assert (result.changed, result.more) == (1, True)
    assert all(wait <= RUN_BUDGET_S for wait in slept)
    statuses = sorted(store.get(task.id).status for task in tasks)  # type: ignore[union-attr]
    assert statuses == sorted([TaskStatus.CANCELLED, TaskStatus.NEW, TaskStatus.NEW])


def test_the_console_lists_only_the_gates_in_force(aws: Any, config: StackConfig) -> None:
    # Given a gate in force, and a pause gate whose until then passes (set last: a set drops gates already past)
    gating = Gating(DynamoTaskStore(aws.dynamodb, config), config)
    gating.set("work", "now", GateAction.PAUSE, utcnow() + timedelta(hours=1), "in force")
    now = utcnow()
    gating.set("work", "past", GateAction.PAUSE, now + timedelta(milliseconds=1), "lifted")
    # When the console reads them, a moment later
    while utcnow() <= now + timedelta(milliseconds=5):
        pass
    # Then only the one in force shows
    assert [gate.collection for gate in ConsoleData(aws, config).gates()] == ["now"]
