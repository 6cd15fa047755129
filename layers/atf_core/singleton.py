"""One task at a time per flow key, for a lambda whose key_limits set singleton.

A new task with a flow key takes the key if the task that holds it (store.holders) has settled or is gone;
otherwise it is refused (FlowKeyBusy, naming the holder), or, when its request says on_conflict=replace and
the holder has not started, it replaces it: the holder is cancelled and the new task takes the key in one
transaction. A holder already claimed by an executor cannot be replaced: the new task is refused (the caller
may try again once it ends). Every write is fenced on what was read, so two schedulers racing on one key
leave exactly one holder; the loser reads again and answers from what it finds.
"""

from __future__ import annotations

from atf_core import lifecycle
from atf_core.config import StackConfig
from atf_core.errors import FlowKeyBusy, InputError
from atf_core.schema import ScheduleRequest, Task
from atf_core.store.base import Change, CreateResult, TaskRef, TaskStore
from atf_core.vocabulary import OnConflict

# Reads and tries again when the key changed hands between its read and its transaction; past this, the key
# is contended and the caller is told so (a 409 it may retry).
ATTEMPTS = 4


def applies(config: StackConfig, request: ScheduleRequest) -> bool:
    """Whether the request's task is a singleton key's; on_conflict on any other is refused, naming it."""
    limits = config.lambda_named(request.lambda_).key_limits
    singleton = request.flow_key is not None and limits is not None and limits.singleton
    if request.on_conflict is not None and not singleton:
        raise InputError(
            f"lambda {request.lambda_!r} sets no key_limits.singleton: on_conflict has no use", "on_conflict"
        )
    return singleton


def create_singleton(store: TaskStore, task: Task, fingerprint: str, on_conflict: OnConflict | None) -> CreateResult:
    """Create the task as its flow key's holder, or raise FlowKeyBusy."""
    assert task.flow_key is not None
    if task.key is not None and store.get(task.id) is not None:
        return store.create(task, fingerprint)  # its idempotency key's task: refused, that task answers
    for _ in range(ATTEMPTS):
        held_by = store.key_holder(task.lambda_, task.flow_key)
        if held_by == task.id:  # a resent request whose first try took the key after the check above
            return store.create(task, fingerprint)  # refused: the task answers (with what it replaced)
        holder = store.get(held_by) if held_by is not None else None
        busy = holder is not None and not holder.status.settled
        if holder is not None and busy:
            _check_replaceable(task, holder, on_conflict)
        result = store.create_holding(task, fingerprint, held_by, holder if busy else None)
        if result is not None:
            return result
    raise FlowKeyBusy(
        f"flow key {task.flow_key!r} changed hands {ATTEMPTS} times while scheduling: try again", "flow_key"
    )


def redrive(store: TaskStore, task: TaskRef, change: Change) -> bool:
    """Send a dead letter of a singleton key back to new as the key's holder again: whether it was sent back
    (False: it is no longer a dead letter). FlowKeyBusy where another task took the key meanwhile and has not
    settled: redriving it would run two at once."""
    assert task.flow_key is not None
    for _ in range(ATTEMPTS):
        held_by, holder = busy_holder(store, task)
        if holder is not None:
            raise FlowKeyBusy(
                f"flow key {task.flow_key!r} of lambda {task.lambda_name!r} is held by task {holder.id} "
                f"({holder.status.value}): task {task.id} stays a dead letter",
                "flow_key",
            )
        applied = store.redrive_holding(task, change, held_by)
        if applied is not None:
            return applied
    raise FlowKeyBusy(f"flow key {task.flow_key!r} changed hands {ATTEMPTS} times while redriving", "flow_key")


def busy_holder(store: TaskStore, task: TaskRef) -> tuple[str | None, Task | None]:
    """The id the key's holder names, and that task where another one holds the key unsettled (else None)."""
    assert task.flow_key is not None
    held_by = store.key_holder(task.lambda_name, task.flow_key)
    holder = store.get(held_by) if held_by is not None and held_by != task.id else None
    return held_by, holder if holder is not None and not holder.status.settled else None


def _check_replaceable(task: Task, holder: Task, on_conflict: OnConflict | None) -> None:
    held = f"flow key {task.flow_key!r} of lambda {task.lambda_!r} is held by task {holder.id} ({holder.status.value})"
    if on_conflict is not OnConflict.REPLACE:
        raise FlowKeyBusy(
            f"{held}: one task at a time per key (on_conflict=replace replaces a waiting one)", "flow_key"
        )
    if not lifecycle.CANCEL.allows(holder.status):
        raise FlowKeyBusy(f"{held}, which has started: only a waiting task can be replaced", "flow_key")
