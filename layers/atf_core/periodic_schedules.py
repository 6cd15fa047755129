"""Managing periodic schedules, and firing the due ones (the consumer does, every poll); when each
recurs is atf_core.recurrence."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from atf_core.clock import Clock
from atf_core.config import StackConfig
from atf_core.errors import Conflict, FlowKeyBusy, NotFound, UnknownPriority
from atf_core.recurrence import Schedule, ScheduleSpec, choose
from atf_core.schema import STORED, ScheduleRequest, TaskStatus, from_ms, to_ms, utcnow
from atf_core.store.base import TaskStore
from atf_core.store.items import (
    PARKED_MS,
    SCHEDULES_PARTITION,
    SPEC_FIELD,
    ItemStore,
    schedule_fields,
    schedule_from,
    schedule_id,
    schedule_name,
)
from atf_core.store.table import BATCH_GET_KEYS
from atf_core.tasks import Scheduling
from atf_core.vocabulary import Overlap

log = logging.getLogger("atf.schedules")
SAVE_TRIES = 5
FIRST_LIST_READ = 8  # schedules read at once when a list starts; each further read doubles, to BatchGetItem's limit


@dataclass
class FireReport:
    created: int = 0
    skipped: int = 0


class Schedules:
    def __init__(self, store: TaskStore, items: ItemStore, config: StackConfig, clock: Clock = utcnow) -> None:
        self._store = store
        self._items = items
        self._config = config
        self._clock = clock
        self._scheduling = Scheduling(store, config, clock)

    # -- management ----------------------------------------------------------
    def put(self, name: str, spec: ScheduleSpec, now: datetime | None = None, owner: str | None = None) -> Schedule:
        """Create or replace a schedule; a replaced one keeps its history and restarts its cadence now. With
        `owner` (a lambda's own route), a schedule of that name held by another lambda is a Conflict, and the
        replacing write holds only if the stored spec is still the one read: the check is in the write."""
        self._check(spec)
        now = from_ms(to_ms(now or self._clock()))  # as stored, so what put returns is what get reads
        for _ in range(SAVE_TRIES):  # a consumer firing it meanwhile bumps its version: read again
            raw = self._read(name)
            current = schedule_from(raw) if raw else None
            if owner is not None and current is not None and current.spec.lambda_ != owner:
                raise Conflict(f"schedule name {name!r} is taken by another lambda", "name")
            schedule = Schedule(
                name=name,
                spec=spec,
                paused=current.paused if current else False,
                created_at=now,
                last_occurrence=current.last_occurrence if current else None,
                next_occurrence=None if current and current.paused else spec.next_after(now, now),
                last_task_id=current.last_task_id if current else None,
                fired=current.fired if current else 0,
                skipped=current.skipped if current else 0,
                version=current.version + 1 if current else 1,
            )
            holding = {SPEC_FIELD: raw[SPEC_FIELD]} if raw and owner is not None else None
            if self._save(schedule, None if current is None else current.version, holding):
                return schedule
        raise Conflict(f"schedule {name!r} kept changing while it was written; retry", "name")

    def get(self, name: str, owner: str | None = None) -> Schedule:
        """The schedule; with `owner` (a lambda's own route), another lambda's is not found either."""
        return self._owned(name, self._read(name), owner)[0]

    def all(self) -> list[Schedule]:
        return list(self.in_order())

    def in_order(self, after: str | None = None, lambda_name: str | None = None) -> Iterator[Schedule]:
        """The schedules by name, from the first after `after`, of `lambda_name` only if given. One index query
        lists the names; the schedules are read in batches as they are reached, the first small and each next
        one twice as large, so a page of large schedules that fills in a few reads few more. Each state is read
        strongly consistent, as get() reads it: a list right after a pause shows the schedule paused."""
        ids = self._items.partition(SCHEDULES_PARTITION, PARKED_MS)
        names = sorted(name for name in map(schedule_name, ids) if after is None or name > after)
        start, size = 0, FIRST_LIST_READ
        while start < len(names):
            batch = names[start : start + size]
            raws = self._items.get_many(map(schedule_id, batch), consistent=True)
            for name in batch:
                raw = raws.get(schedule_id(name))  # None: deleted since the index listed it
                schedule = schedule_from(raw) if raw else None
                if schedule is not None and lambda_name in (None, schedule.spec.lambda_):
                    yield schedule
            start, size = start + size, min(2 * size, BATCH_GET_KEYS)

    def delete(self, name: str, owner: str | None = None) -> None:
        """Delete it; with `owner`, only while the stored spec is still that lambda's one read (in the delete:
        a schedule of that name made again by another lambda meanwhile is not deleted)."""
        if owner is None:
            if not self._items.delete(schedule_id(name)):
                raise NotFound(f"no schedule {name!r}", "name")
            return
        _, holding = self._owned(name, self._read(name), owner)
        if not self._items.delete(schedule_id(name), holding):
            self._owned(name, self._read(name), owner)  # gone, or another lambda's now: not found
            raise Conflict(f"schedule {name!r} changed while it was deleted; retry", "name")

    def set_paused(self, name: str, paused: bool, now: datetime | None = None, owner: str | None = None) -> Schedule:
        now = now or self._clock()
        for _ in range(SAVE_TRIES):  # a pause must not be lost to a consumer firing the schedule meanwhile
            current, holding = self._owned(name, self._read(name), owner)
            # Paused, it has no next occurrence (it fires nothing); resumed, the next one from now
            following = None if paused else current.spec.next_after(now, current.created_at)
            updated = current.model_copy(
                update={"paused": paused, "next_occurrence": following, "version": current.version + 1}
            )
            if self._save(updated, current.version, holding):
                return updated
        raise Conflict(f"schedule {name!r} kept changing while it was written; retry", "name")

    def upcoming(self, name: str, count: int = 5) -> list[datetime]:
        return self.get(name).next_occurrences(self._clock(), count)

    # -- firing --------------------------------------------------------------
    def fire_due(self, now: datetime, lookahead_s: float = 0.0) -> FireReport:
        """Create the tasks of occurrences due by now + lookahead (their run_at is the occurrence). A schedule
        that cannot fire (its lambda left the configuration, a throttled write, a spec an upgrade no longer
        reads) does not hold up those after it; the first such error is raised once they have all fired, for
        the consumer to count (the alarm on stuck periodic tasks). Its occurrence was not saved: it fires at
        the next poll."""
        report, first_error = FireReport(), None
        up_to = now + timedelta(seconds=lookahead_s)
        for item_id in self._items.partition(SCHEDULES_PARTITION, to_ms(up_to)):
            try:
                raw = self._items.get(item_id)
                if raw is not None:
                    self._fire(schedule_from(raw), now, up_to, report)
            except Exception as error:  # noqa: BLE001 - raised once the others have fired
                log.warning("schedule %s could not fire: %s", item_id, error)
                first_error = first_error or error
        if first_error is not None:
            raise first_error
        return report

    def _fire(self, schedule: Schedule, now: datetime, up_to: datetime, report: FireReport) -> None:
        if schedule.paused:  # paused after the index listed it (or the index lags): nothing of it runs
            return
        spec = schedule.spec
        # A schedule replaced (put again) restarts its cadence from the put: the occurrences of its new spec
        # before then were never its own, whenever the last one of the old spec was.
        after = max(schedule.last_occurrence or schedule.created_at, schedule.created_at)
        due = spec.due(after, up_to, schedule.created_at)
        chosen = choose(spec, due.latest, now)
        task_id, created, skipped = schedule.last_task_id, 0, due.count - len(chosen)
        # Overlap is with an earlier firing's task: the occurrences one catch-up runs (catch_up all) are made
        # together, and each would otherwise find the one just made still running and skip itself.
        if chosen and spec.overlap is Overlap.SKIP and self._still_running(task_id):
            chosen, skipped = [], due.count
        for occurrence in chosen:
            try:
                task_id = self._create(schedule, occurrence, now)
            except FlowKeyBusy:  # its singleton flow key is held by another task: skipped, as an overlap is
                skipped += 1
                continue
            except Conflict as error:
                if error.field != "key":
                    raise
                # The occurrence has a task already, made by this name's schedule before a put or a delete
                # changed what it makes: that task stands for it. Raised on, every poll would stop here.
                log.warning("schedule %s: the occurrence %s has a task of an earlier spec", schedule.name, occurrence)
                skipped += 1
                continue
            created += 1
        updated = schedule.model_copy(
            update={
                "last_occurrence": due.latest[-1] if due.latest else schedule.last_occurrence,
                "next_occurrence": spec.next_after(up_to, schedule.created_at),
                "last_task_id": task_id,
                "fired": schedule.fired + created,
                "skipped": schedule.skipped + skipped,
            }
        )
        if self._save(updated, schedule.version):  # another consumer may have fired it first: fine
            report.created += created
            report.skipped += skipped

    def _create(self, schedule: Schedule, occurrence: datetime, now: datetime) -> str:
        spec = schedule.spec
        request = ScheduleRequest.model_validate(
            {
                "lambda": spec.lambda_,
                "payload": spec.payload,
                "collection": spec.collection,
                "priority": spec.priority,
                "max_attempts": spec.max_attempts,
                "timeout_seconds": spec.timeout_seconds,
                "flow_key": spec.flow_key,
                "run_at": occurrence,
                # one task per occurrence, however many consumers fire it
                "key": f"periodic/{schedule.name}/{to_ms(occurrence)}",
            },
            context=STORED,  # the spec as stored: a check added on input since does not stop it firing
        )
        return self._scheduling.schedule(request, now=now).task.id

    def _still_running(self, task_id: str | None) -> bool:
        if task_id is None:
            return False
        task = self._store.get(task_id)
        return task is not None and not task.status.terminal and task.status is not TaskStatus.DEAD_LETTER

    # -- storage -------------------------------------------------------------
    def _read(self, name: str) -> dict[str, Any] | None:
        """The stored schedule's item (a strongly consistent read)."""
        return self._items.get(schedule_id(name))

    @staticmethod
    def _owned(name: str, raw: dict[str, Any] | None, owner: str | None) -> tuple[Schedule, dict[str, Any] | None]:
        """The stored schedule, NotFound where there is none or, with `owner`, it is another lambda's; and what a
        write made on the owner's behalf conditions on (the spec read, which names the lambda)."""
        schedule = schedule_from(raw) if raw else None
        if schedule is None or (owner is not None and schedule.spec.lambda_ != owner):
            raise NotFound(f"no schedule {name!r}", "name")
        return schedule, ({SPEC_FIELD: raw[SPEC_FIELD]} if raw and owner is not None else None)

    def _save(self, schedule: Schedule, version: int | None, holding: dict[str, Any] | None = None) -> bool:
        fields, index = schedule_fields(schedule)
        return self._items.put(schedule_id(schedule.name), fields, index, version, holding)

    def _check(self, spec: ScheduleSpec) -> None:
        lambda_spec = self._config.lambda_named(spec.lambda_)
        if spec.priority is not None and spec.priority not in lambda_spec.priorities:
            raise UnknownPriority(f"priority {spec.priority!r} is not one of {lambda_spec.priorities}", "priority")
