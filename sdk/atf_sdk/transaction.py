"""Scheduling a task inside the caller's own DynamoDB transaction (docs/transactions.md).

`task_entries` checks a request as the API does (the same ScheduleRequest, then the same checks against
the stack's configuration: atf_core.tasks.build_task) and returns the TransactWriteItems entry that creates
the task: the very PutItem the frontend sends (atf_core.store.tasks.create_request). Nothing is written
here. The caller sends the entries together with its own Put, Update, Delete and ConditionCheck entries in
one `transact_write_items`: its write and the task commit together or not at all.

The SDK cannot see the deployed stack, so it is given its configuration (the StackConfig the stack was
deployed with: the table's name, each lambda's priorities, defaults and shards) rather than asking the API
for it: a transaction then needs DynamoDB alone. A task with an idempotency key that is already taken
cancels the whole transaction; `TaskEntries.existing` tells that refusal from the caller's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from atf_core import debounce, singleton, tracing
from atf_core.config import StackConfig
from atf_core.errors import InputError
from atf_core.schema import ScheduleRequest, Task, utcnow
from atf_core.store.base import CreateResult
from atf_core.store.codec import item_to_task
from atf_core.store.tasks import CREATE_ACTIONS, create_refused, create_request
from atf_core.tasks import build_task, fingerprint_of
from atf_sdk.operations import checked, traced

# TransactWriteItems' own limits: the task's entries count toward both.
# https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html
MAX_TRANSACTION_ITEMS = 100
MAX_TRANSACTION_BYTES = 4 * 1024 * 1024
# What the caller's role needs on the task table for the entries (IAM authorizes a transaction entry by entry).
REQUIRED_ACTIONS = CREATE_ACTIONS
CANCELLED = "TransactionCanceledException"
CONDITION_FAILED = "ConditionalCheckFailed"


@dataclass(frozen=True)
class TaskEntries:
    """The task a transaction will create (as it will be stored), and the entries that create it, in the
    low-level client's format (TransactItems entries)."""

    task: Task
    entries: list[dict[str, Any]]
    fingerprint: str

    def existing(self, error: ClientError, items: Sequence[Mapping[str, Any]]) -> CreateResult | None:
        """Whether a cancelled transaction was refused because this task's idempotency key was taken.

        `items` is the TransactItems list that was sent (the task's entries among them). The answer is the
        task that holds the key (`conflict` when a different request made it; otherwise it is this very
        task, made by an earlier transaction or API call), or None when the transaction failed for another
        reason: the caller's own condition, a conflict with another transaction, a limit.
        """
        if error.response.get("Error", {}).get("Code") != CANCELLED:
            return None
        reasons = list(error.response.get("CancellationReasons") or [])
        for position, item in enumerate(items):
            if item in self.entries and position < len(reasons) and reasons[position].get("Code") == CONDITION_FAILED:
                in_the_way = reasons[position].get("Item")
                return create_refused(self.task.id, dict(in_the_way) if in_the_way else None, self.fingerprint)
        return None


def task_entries(
    config: StackConfig, request: ScheduleRequest | Mapping[str, Any], *, now: datetime | None = None
) -> TaskEntries:
    """The TransactWriteItems entries that create the task `request` asks for (a ScheduleRequest, or the JSON
    object the API's POST /v1/tasks takes), in the stack `config` describes. Bad input raises the
    atf_core.errors class the API would answer (UnknownLambda, UnknownPriority, InputError ...), naming the
    field, before anything is built."""
    checked_request = checked(ScheduleRequest, request)
    with tracing.outgoing("atf schedule", {tracing.LAMBDA: checked_request.lambda_}) as span:
        scheduled = traced(checked_request, span.traceparent)
        task = build_task(config, scheduled, now or utcnow())
        if singleton.applies(config, scheduled):
            raise InputError("a singleton flow key is taken through the API, not inside your transaction", "flow_key")
        if debounce.of(config, scheduled) is not None:
            raise InputError(
                "a debounced flow key is scheduled through the API, not inside your transaction", "flow_key"
            )
        span.set(tracing.TASK_ID, task.id)
        fingerprint = fingerprint_of(config, scheduled)
        put = create_request(config, task, fingerprint)
        # The task as it will be stored (times to the millisecond), as the API and `atf status` will show it
        return TaskEntries(item_to_task(put["Item"]), [{"Put": put}], fingerprint)


__all__ = ["MAX_TRANSACTION_BYTES", "MAX_TRANSACTION_ITEMS", "REQUIRED_ACTIONS", "TaskEntries", "task_entries"]
