"""Acting on many waiting tasks at once: cancel, reschedule or reprioritise a selection.

A selection names any of lambda, collection, status and a window on when the tasks run next; one that
names none of them matches every waiting task and needs `every` (the API's `all`). It is read from the
scheduling index (each lambda's, priority's and shard's partition, in time order, the window as the
sort-key range and the collection as a filter), then from the items, which say whether each task is
still waiting: only tasks no executor has claimed (new, enqueued, retriable_failure) are selected.
Chain links still waiting for their parents have no index entry and are not found here.

Each action has a dry run, which lists what it would touch and when, and changes nothing; the real
run writes each task with its own conditional write (lifecycle.CANCEL, or AMEND through atf_core.amend),
so a task claimed between the read and the write is left as it is and reported as skipped, as is one the
change would run at or after its expire_at (it would expire instead: a single change refuses it). A rate
spreads the real run out: rescheduled or reprioritised tasks run at most per_second a second (as a
redrive's), cancellations are written at most per_second a second. A real run stops writing after
RUN_BUDGET_S, though never before its first write (its answer lists only the tasks it reached, with
`more`): call it again for the rest.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice

from atf_core import lifecycle
from atf_core.amend import Amendment, amend, check_drip, check_priority, check_run_at, dripped, new_entry
from atf_core.clock import Clock
from atf_core.config import StackConfig
from atf_core.deadletters import EPOCH, FOREVER
from atf_core.definitions import Attr
from atf_core.errors import InputError, UnknownPriority
from atf_core.lifecycle import Assoc
from atf_core.schema import Task, TaskStatus, utcnow
from atf_core.store.base import Change, DueEntry, Outcome, TaskRef, TaskStore
from atf_core.store.codec import index_partition, shard_of
from atf_core.vocabulary import MAX_BULK

S = TaskStatus
WAITING = frozenset({S.NEW, S.ENQUEUED, S.RETRIABLE_FAILURE})
# A real run answers after this long at most (reads included), well inside API Gateway's 29 s and the
# clients' read timeouts; what it did not reach is left as it was, and `more` says to call again.
RUN_BUDGET_S = 6.0
READ_BATCH = 100  # BatchGetItem's limit


@dataclass(frozen=True)
class TaskFilter:
    lambda_name: str | None = None
    collection: str | None = None
    statuses: frozenset[TaskStatus] = WAITING
    since: datetime | None = None  # runs next at or after
    until: datetime | None = None  # runs next at or before
    limit: int = MAX_BULK
    flow_key: str | None = None


def task_filter(
    lambda_name: str | None = None,
    collection: str | None = None,
    statuses: frozenset[TaskStatus] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    every: bool = False,
    limit: int = MAX_BULK,
    flow_key: str | None = None,
) -> TaskFilter:
    """The core's filter once it makes sense; one that would match every waiting task needs `every`."""
    if statuses is not None and not statuses <= WAITING:
        wrong = ", ".join(sorted(s.value for s in statuses - WAITING))
        raise InputError(
            f"status {wrong}: only waiting tasks (new, enqueued, retriable_failure) can be changed", "status"
        )
    if since is not None and until is not None and since > until:
        raise InputError("until is before since", "until")
    narrowed = lambda_name or collection or flow_key or since or until or (statuses is not None and statuses != WAITING)
    if not narrowed and not every:
        raise InputError(
            "the filter matches every waiting task: name a lambda, collection, flow key, status or window, or set all",
            "all",
        )
    return TaskFilter(lambda_name, collection, statuses or WAITING, since, until, min(limit, MAX_BULK), flow_key)


@dataclass(frozen=True)
class WaitingTask:
    id: str
    lambda_name: str
    collection: str
    priority: str
    status: TaskStatus
    next_at: datetime  # when it runs (before the change)
    flow_key: str | None = None


@dataclass
class BulkChange:
    """What a bulk action did, or in a dry run would do."""

    dry_run: bool
    matched: list[WaitingTask] = field(default_factory=list)
    changed: int = 0
    # Left as they were: claimed (or changed) between the read and the write, or moved to or past their expire_at.
    skipped: list[str] = field(default_factory=list)
    more: bool = False  # the selection holds more than `limit`: run it again for the rest
    first_at: datetime | None = None  # when the first and last of them run (cancel: are cancelled)
    last_at: datetime | None = None


class BulkChanges:
    def __init__(
        self,
        store: TaskStore,
        config: StackConfig,
        clock: Clock = utcnow,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._store, self._config, self._clock, self._sleep = store, config, clock, sleep

    def cancel(self, selection: TaskFilter, dry_run: bool, per_second: float | None = None) -> BulkChange:
        began = time.monotonic()
        tasks, result = self._selected(selection, dry_run)
        start = self._clock()
        _span(result, dripped(start, len(tasks), per_second))
        if dry_run:
            return result
        for i, task in enumerate(tasks):
            # A write whose turn comes past the budget is not waited for: the answer says there are more
            if _out_of_time(result, i, began, 0.0 if per_second is None else i / per_second):
                break
            if per_second is not None:
                self._sleep(max(0.0, began + i / per_second - time.monotonic()))
            change = Change(now=self._clock(), reason="cancelled in bulk")
            _tally(result, task, self._store.transition(TaskRef.of(task), lifecycle.CANCEL, change))
        return result

    def reschedule(
        self, selection: TaskFilter, run_at: datetime, dry_run: bool, per_second: float | None = None
    ) -> BulkChange:
        """To run at `run_at`, the n-th of them n / per_second seconds later."""
        check_run_at(run_at, self._clock())
        began = time.monotonic()
        tasks, result = self._selected(selection, dry_run)
        times = dripped(run_at, len(tasks), per_second)
        check_drip(times, self._clock())
        return self._amend(result, tasks, Amendment(run_at=run_at), times, began)

    def reprioritise(
        self, selection: TaskFilter, priority: str, dry_run: bool, per_second: float | None = None
    ) -> BulkChange:
        """To `priority`'s queue, each at its own time, or the n-th no sooner than n / per_second seconds from now.
        The priority must be one of every selected task's lambda (of the lambda named, if one is, task or not)."""
        if selection.lambda_name is not None:
            check_priority(self._config, selection.lambda_name, priority)
        elif not any(priority in spec.priorities for spec in self._config.lambdas.values()):
            raise UnknownPriority(f"priority {priority!r} is not one of any lambda's", "priority")
        began = time.monotonic()
        tasks, result = self._selected(selection, dry_run, leave_priority=priority)
        for lambda_name in sorted({task.lambda_ for task in tasks}):
            check_priority(self._config, lambda_name, priority)
        amendment, now = Amendment(priority=priority), self._clock()
        gaps = dripped(now, len(tasks), per_second)
        times = [max(new_entry(task, amendment, now), at) for task, at in zip(tasks, gaps, strict=True)]
        check_drip(times, now)
        return self._amend(result, tasks, amendment, times, began)

    def _amend(
        self, result: BulkChange, tasks: list[Task], amendment: Amendment, times: list[datetime], began: float
    ) -> BulkChange:
        # When the tasks it moves run: not those it leaves because they would expire first
        _span(result, [at for task, at in zip(tasks, times, strict=True) if not _would_expire(task, at)])
        for i, (task, at) in enumerate(zip(tasks, times, strict=True)):
            if not result.dry_run and _out_of_time(result, i, began):
                break
            if _would_expire(task, at):  # it would expire rather than run
                result.skipped.append(task.id)
            elif not result.dry_run:
                _tally(result, task, amend(self._store, task, amendment, self._clock(), at=at))
        return result

    def _selected(
        self, selection: TaskFilter, dry_run: bool, leave_priority: str | None = None
    ) -> tuple[list[Task], BulkChange]:
        tasks, more = self._select(selection, leave_priority)
        return tasks, BulkChange(dry_run=dry_run, matched=[_view(t) for t in tasks], more=more)

    def _select(self, selection: TaskFilter, leave_priority: str | None) -> tuple[list[Task], bool]:
        """The first `limit` waiting tasks of the selection, soonest first, and whether there are more.

        Each partition is read in time order, so its first `limit` entries are all it can contribute;
        the items then say which of those are still waiting (the index is read eventually consistent)."""
        entries: list[DueEntry] = []
        more = False
        for partition in self._partitions(selection, leave_priority):
            found = list(islice(partition, selection.limit + 1))
            more |= len(found) > selection.limit
            entries += found[: selection.limit]
        entries.sort(key=lambda e: (e.next_ms, e.id))
        tasks: list[Task] = []
        for start in range(0, len(entries), READ_BATCH):
            chunk = entries[start : start + READ_BATCH]
            by_id = {t.id: t for t in self._store.get_many([e.id for e in chunk])}
            for entry in chunk:
                task = by_id.get(entry.id)
                if task is not None and _selects(selection, task, leave_priority):
                    if len(tasks) == selection.limit:
                        return tasks, True
                    tasks.append(task)
        return tasks, more

    def _lambdas(self, selection: TaskFilter) -> list[str]:
        if selection.lambda_name is not None:
            self._config.lambda_named(selection.lambda_name)  # an unknown lambda is refused, naming it
            return [selection.lambda_name]
        return sorted(self._config.lambdas)

    def _partitions(self, selection: TaskFilter, leave_priority: str | None) -> Iterator[Iterator[DueEntry]]:
        assocs = [Assoc.NEW] if selection.statuses & {S.NEW, S.ENQUEUED} else []
        assocs += [Assoc.STARTED] if S.RETRIABLE_FAILURE in selection.statuses else []
        equal = {Attr.COLLECTION: selection.collection} if selection.collection else {}
        if selection.flow_key is not None:
            equal[Attr.FLOW_KEY] = selection.flow_key
        low, high = selection.since or EPOCH, selection.until or FOREVER
        for lambda_name in self._lambdas(selection):
            for priority in self._config.lambdas[lambda_name].priorities:
                if priority == leave_priority:
                    continue
                for assoc in assocs:
                    for shard in _shards(self._config.shards_of(lambda_name), selection.flow_key):
                        partition = index_partition(assoc, lambda_name, priority, shard)
                        yield self._store.entries(partition, low, high, equal)


def _shards(shards: int, flow_key: str | None) -> range:
    """The index shards that may hold the selection: a keyed task's shard is its key's, so a key names one."""
    if flow_key is None:
        return range(shards)
    shard = shard_of("", shards, flow_key)
    return range(shard, shard + 1)


def _selects(selection: TaskFilter, task: Task, leave_priority: str | None) -> bool:
    """Whether the task, as its item stands, is still in the selection."""
    if task.status not in selection.statuses or task.next_at is None or task.priority == leave_priority:
        return False
    if selection.flow_key is not None and task.flow_key != selection.flow_key:
        return False
    return (selection.since or EPOCH) <= task.next_at <= (selection.until or FOREVER)


def _out_of_time(result: BulkChange, reached: int, began: float, turn_s: float = 0.0) -> bool:
    """Past the run's budget, or the next write's turn (`turn_s` after `began`, at a drip rate) is: the answer
    lists only the first `reached` tasks, and says there are more. Never before the first write: reads slower
    than the budget (a loaded table, a wide selection) would otherwise leave every call with nothing done, and
    calling again would never get through the selection."""
    if reached == 0 or max(time.monotonic() - began, turn_s) <= RUN_BUDGET_S:
        return False
    result.matched, result.more = result.matched[:reached], True
    return True


def _would_expire(task: Task, at: datetime) -> bool:
    return task.expire_at is not None and at >= task.expire_at


def _span(result: BulkChange, times: list[datetime]) -> None:
    if times:
        result.first_at, result.last_at = min(times), max(times)


def _tally(result: BulkChange, task: Task, outcome: Outcome) -> None:
    if outcome.applied:
        result.changed += 1
    else:
        result.skipped.append(task.id)


def _view(task: Task) -> WaitingTask:
    assert task.next_at is not None  # _selects keeps only indexed tasks
    return WaitingTask(task.id, task.lambda_, task.collection, task.priority, task.status, task.next_at, task.flow_key)
