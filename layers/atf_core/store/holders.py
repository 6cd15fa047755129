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
from atf_core.schema import Task
from atf_core.store import codec
from atf_core.store.base import Change, TaskRef
from atf_core.store.table import Table, put_request
from atf_core.store.update import TransitionUpdate

HOLDER = "t"  # the holder item's attribute: the id of the task that took the key
CONDITION_FAILED = "ConditionalCheckFailed"


def holder_id(lambda_name: str, flow_key: str) -> str:
    """The holder item's id ('#' is in neither a lambda's nor a key's characters: no clash with a task id)."""
    return f"#holder#{lambda_name}#{flow_key}"


def read_holder(table: Table, lambda_name: str, flow_key: str) -> str | None:
    found = table.get(holder_id(lambda_name, flow_key))
    return codec.from_item(found).get(HOLDER) if found else None


def take_key(
    table: Table, config: StackConfig, create: dict[str, Any], task: Task, held_by: str | None, cancel: Task | None
) -> list[dict[str, Any]] | None:
    """Create the task (`create`: its PutItem) as the key's holder in one transaction; None when written, else
    DynamoDB's reasons in entry order: the create, the holder, then the cancel if any."""
    assert task.flow_key is not None
    holder = {Attr.ID: {"S": holder_id(task.lambda_, task.flow_key)}, HOLDER: {"S": task.id}}
    if held_by is None:
        claim = put_request(table.name, holder, "attribute_not_exists(#id)", {"#id": Attr.ID})
    else:
        claim = put_request(table.name, holder, "#t = :held", {"#t": HOLDER}, {":held": {"S": held_by}})
    entries: list[dict[str, Any]] = [{"Put": create}, {"Put": claim}]
    if cancel is not None:
        # on the task's own item, so a repeat of the request (its idempotency key) says what it replaced too
        create = {**create, "Item": {**create["Item"], Attr.REPLACED: {"S": cancel.id}}}
        entries[0] = {"Put": create}
        reason = f"replaced by task {task.id} (singleton flow key {task.flow_key!r})"
        update = TransitionUpdate(config, TaskRef.of(cancel), lifecycle.CANCEL, Change(task.created_at, reason=reason))
        built = update.build()
        entries.append(
            {
                "Update": {
                    "TableName": table.name,
                    "Key": {Attr.ID: {"S": cancel.id}},
                    "UpdateExpression": built.expression,
                    "ConditionExpression": built.condition,
                    "ExpressionAttributeNames": built.names,
                    "ExpressionAttributeValues": built.values,
                }
            }
        )
    return table.transact(entries)
