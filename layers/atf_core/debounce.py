"""Debounce per flow key: a burst of tasks with one key runs once, with the last payload, after a quiet period,
never later than a maximum delay (a lambda's key_limits.debounce).

The key's pending task is named by its holder item (store.holders, as for singleton keys). A request finds it
still waiting (new or sent to its queue, never claimed: attempt 0) and merges into it: the payload becomes the
request's, and the run time becomes min(now + quiet, burst's first task + max delay) (never earlier than it
was). That is an amend (lifecycle.AMEND) fenced by the attempt read, so a task claimed meanwhile refuses it
(and by the entry read, so a merge that landed meanwhile makes this one read again: run times only move later);
a later run time makes a message the consumer already sent stale (the claim refuses it, and the consumer sends
the task again from its new entry), so the burst runs once, with the payload of the last merge. Otherwise the
request starts a new burst: a task due at max(its time, now + quiet) takes the key, on the condition that the
holder still names what was read (store.create_holding), so schedulers racing on one key leave one pending task.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from atf_core import lifecycle
from atf_core.amend import Amendment, new_entry
from atf_core.config import Debounce, StackConfig
from atf_core.definitions import Attr
from atf_core.errors import FlowKeyBusy, InputError, NotFound
from atf_core.schema import ScheduleRequest, Task, TaskStatus, encode_payload, same_request, to_ms
from atf_core.store.base import Change, CreateResult, MergeRecord, TaskRef, TaskStore

# Reads and tries again when the key's pending task changed between its read and the write; past this, the key
# is contended and the caller is told so (a 409 it may retry).
ATTEMPTS = 6
WAITING = frozenset({TaskStatus.NEW, TaskStatus.ENQUEUED})
AMENDED = lifecycle.AMEND.target
# How long before its expire_at a merge may move a burst's run time, at most: the time a due task takes to start
# (ATF's delivery target). Moved to a millisecond before it, the burst expired unless claimed within that millisecond.
START_MARGIN = timedelta(seconds=5)


def of(config: StackConfig, request: ScheduleRequest) -> Debounce | None:
    """The debounce that applies to the request's task: its lambda's, when the task has a flow key."""
    limits = config.lambda_named(request.lambda_).key_limits
    return limits.debounce if request.flow_key is not None and limits is not None else None


def first_due(debounce: Debounce, due: datetime, now: datetime, expire_at: datetime | None) -> datetime:
    """A burst's first task is due once the key has been quiet for quiet_seconds, or later if asked; an
    expire_at before then is refused (build_task asks, so a batch checks every item before writing)."""
    due = max(due, now + timedelta(seconds=debounce.quiet_seconds))
    if expire_at is not None and expire_at <= due:
        raise InputError("expire_at must be after the debounced run time (now + quiet_seconds)", "expire_at")
    return due


def first_run(task: Task, debounce: Debounce) -> Task:
    due = first_due(debounce, task.scheduled_at, task.created_at, task.expire_at)
    return task.model_copy(update={"scheduled_at": due})


def schedule(store: TaskStore, task: Task, fingerprint: str, debounce: Debounce) -> CreateResult:
    """Merge the request into its key's waiting task, or create the task as the key's pending one."""
    flow_key = task.flow_key
    assert flow_key is not None
    task = first_run(task, debounce)
    for _ in range(ATTEMPTS):
        repeat = _repeat(store, task, fingerprint) if task.key is not None else None
        if repeat is not None:  # read each round: a repeat racing this request may have merged first
            return repeat
        held_by = store.key_holder(task.lambda_, flow_key)
        pending = store.get(held_by) if held_by is not None else None
        if pending is not None and waiting(pending):
            merged = _merge(store, pending, task, fingerprint, debounce)
            if merged is not None:
                return merged
            continue  # claimed (or merged by another request) meanwhile: read again
        result = store.create_holding(task, fingerprint, held_by, None)
        if result is not None:
            return result
    raise FlowKeyBusy(f"flow key {flow_key!r} changed {ATTEMPTS} times while scheduling: try again", "flow_key")


def waiting(task: Task) -> bool:
    """Not claimed yet, ever: a task requeued after a lost claim has started, and starts a new burst."""
    return task.status in WAITING and task.attempt == 0


def merged_run_at(pending: Task, debounce: Debounce, now: datetime) -> datetime:
    """min(now + quiet, first + max delay), never earlier than it was, nor later than START_MARGIN before the
    task's expire_at (a merge must not make the burst expire instead of running)."""
    quiet = now + timedelta(seconds=debounce.quiet_seconds)
    latest = pending.created_at + timedelta(seconds=debounce.max_delay_seconds)
    if pending.expire_at is not None:
        latest = min(latest, pending.expire_at - START_MARGIN)
    return max(pending.next_at or pending.scheduled_at, min(quiet, latest))


def _merge(store: TaskStore, pending: Task, task: Task, fingerprint: str, debounce: Debounce) -> CreateResult | None:
    run_at = merged_run_at(pending, debounce, task.created_at)
    amendment = Amendment(run_at=run_at, payload=task.payload)
    entry = pending.next_at or pending.scheduled_at
    change = Change(
        now=task.created_at,
        attempt=pending.attempt,
        next_at=new_entry(pending, amendment, task.created_at),
        payload=encode_payload(task.payload),
        scheduled_at=run_at,
        # fenced on the entry read too: a merge that landed meanwhile is not undone by this one's older time
        observed={Attr.INDEX_SK: to_ms(entry)},
    )
    transition = lifecycle.AMEND
    if task.key is None:
        outcome = store.transition(TaskRef.of(pending), transition, change)
        merged = outcome.task if outcome.applied else None
    else:
        record = MergeRecord(task.id, fingerprint, pending.id)
        written = store.merge(TaskRef.of(pending), transition, change, record)
        written_as = {"payload": task.payload, "scheduled_at": run_at, "next_at": change.next_at, "status": AMENDED}
        merged = pending.model_copy(update=written_as) if written else None
    return None if merged is None else CreateResult(task=merged, created=False, debounced=True)


def _repeat(store: TaskStore, task: Task, fingerprint: str) -> CreateResult | None:
    """A repeat of a request with an idempotency key: the task it made, or the one it was merged into."""
    record = store.merge_record(task.id)
    if record is None:
        return store.create(task, fingerprint) if store.get(task.id) is not None else None
    merged_into = store.get(record.task_id)
    if merged_into is None:
        raise NotFound(f"the task request key {task.key!r} was merged into, {record.task_id}, is gone", "key")
    return CreateResult(
        merged_into, created=False, conflict=not same_request(record.fingerprint, fingerprint), debounced=True
    )
