"""The holder of a singleton flow key: one item per (lambda, flow key) naming the task that took the key last.
(A debounced key's pending task is named by the same item, taken the same way: atf_core.debounce.)

The holder is self-healing: it is never released. A key is held while the task it names is not settled
(atf_core.singleton); a task that ends, whatever ends it (success, failure, cancel, drop, expiry, a dead letter,
its item's retention), frees the key without a write of its own, so no crash between a task's end and a
release can leave the key held forever, and no terminal write in the lifecycle pays for the feature. Taking the
key is one transaction: the new task's create, the holder rewritten on the condition that it still names the task
seen (or does not exist), and, for a replace, the old holder's cancel on its own transition's condition.
"""

from __future__ import annotations

from typing import Any

from atf_core import lifecycle
from atf_core.config import StackConfig
from atf_core.definitions import Attr
from atf_core.lifecycle import Transition
from atf_core.schema import Task
from atf_core.store import codec
from atf_core.store.base import Change, TaskRef
from atf_core.store.table import Table, put_request
from atf_core.store.update import TransitionUpdate

HOLDER = "t"  # the holder item's attribute: the id of the task that took the key
CONDITION_FAILED = "ConditionalCheckFailed"
Reasons = list[dict[str, Any]] | None  # a transaction's answer: None when written, else each entry's reason


def holder_id(lambda_name: str, flow_key: str) -> str:
    """The holder item's id ('#' is in neither a lambda's nor a key's characters: no clash with a task id)."""
    return f"#holder#{lambda_name}#{flow_key}"


def read_holder(table: Table, lambda_name: str, flow_key: str) -> str | None:
    found = table.get(holder_id(lambda_name, flow_key))
    return codec.from_item(found).get(HOLDER) if found else None


def take_key(
    table: Table, config: StackConfig, create: dict[str, Any], task: Task, held_by: str | None, cancel: Task | None
) -> Reasons:
    """Create the task (`create`: its PutItem) as the key's holder in one transaction; None when written, else
    DynamoDB's reasons in entry order: the create, the holder, then the cancel if any."""
    assert task.flow_key is not None
    claim = _claim(table, TaskRef.of(task), task.flow_key, held_by)
    entries: list[dict[str, Any]] = [{"Put": create}, {"Put": claim}]
    if cancel is not None:
        # on the task's own item, so a repeat of the request (its idempotency key) says what it replaced too
        create = {**create, "Item": {**create["Item"], Attr.REPLACED: {"S": cancel.id}}}
        entries[0] = {"Put": create}
        reason = f"replaced by task {task.id} (singleton flow key {task.flow_key!r})"
        change = Change(task.created_at, reason=reason)
        entries.append(transition_entry(table, config, TaskRef.of(cancel), lifecycle.CANCEL, change))
    return table.transact(entries)


def redrive_as_holder(table: Table, config: StackConfig, task: TaskRef, change: Change, held_by: str | None) -> Reasons:
    """Send a dead letter of a singleton key back to new as its key's holder again, in one transaction: the
    redrive, and the holder rewritten on the condition that it still names `held_by` (settled, or the task
    itself). None when written, else DynamoDB's reasons in entry order: the redrive, then the holder."""
    assert task.flow_key is not None
    redrive = transition_entry(table, config, task, lifecycle.REDRIVE, change)
    return table.transact([redrive, {"Put": _claim(table, task, task.flow_key, held_by)}])


def _claim(table: Table, task: TaskRef, flow_key: str, held_by: str | None) -> dict[str, Any]:
    """The holder item naming the task, written only where it still names `held_by` (None: where none is)."""
    holder = {Attr.ID: {"S": holder_id(task.lambda_name, flow_key)}, HOLDER: {"S": task.id}}
    if held_by is None:
        return put_request(table.name, holder, "attribute_not_exists(#id)", {"#id": Attr.ID})
    return put_request(table.name, holder, "#t = :held", {"#t": HOLDER}, {":held": {"S": held_by}})


def transition_entry(
    table: Table, config: StackConfig, task: TaskRef, transition: Transition, change: Change
) -> dict[str, Any]:
    """A lifecycle transition as a TransactWriteItems Update entry, on the same condition as on its own."""
    built = TransitionUpdate(config, task, transition, change).build()
    return {
        "Update": {
            "TableName": table.name,
            "Key": {Attr.ID: {"S": task.id}},
            "UpdateExpression": built.expression,
            "ConditionExpression": built.condition,
            "ExpressionAttributeNames": built.names,
            "ExpressionAttributeValues": built.values,
        }
    }
