"""One-off tasks as the frontend handles them: how a request becomes a task, and accepting, reading,
changing and cancelling one (Scheduling). Periodic ones are in periodic_schedules.py, chains in chains.py."""

from __future__ import annotations

import uuid
from datetime import datetime

from atf_core import debounce, lifecycle, singleton, tracing
from atf_core.amend import Amendment, amend, check_priority, check_run_at
from atf_core.clock import Clock
from atf_core.config import StackConfig
from atf_core.errors import Conflict, InputError, NotFound, UnknownPriority
from atf_core.schema import Fingerprint, ScheduleRequest, Task, TaskStatus, utcnow
from atf_core.store.base import Change, CreateResult, TaskRef, TaskStore

_KEY_NAMESPACE = uuid.UUID("6f1c2a43-5b0e-4c43-9a57-7f4b1d2e9c10")


def task_id_for(lambda_name: str, key: str | None) -> str:
    """Idempotency keys map to a fixed id, so a repeated request finds its task."""
    if key is None:
        return uuid.uuid4().hex
    return uuid.uuid5(_KEY_NAMESPACE, f"{lambda_name}\n{key}").hex


def build_task(config: StackConfig, request: ScheduleRequest, now: datetime) -> Task:
    """The task a request asks for, after the checks that need the configuration."""
    spec = config.lambda_named(request.lambda_)
    priority = request.priority or spec.default_priority
    if priority not in spec.priorities:
        raise UnknownPriority(f"priority {priority!r} is not one of {spec.priorities}", "priority")
    due = request.due_time(now)
    check_run_at(due, now, "run_at" if request.run_at else "delay_seconds")
    if request.expire_at is not None and request.expire_at <= max(due, now):
        raise InputError("expire_at must be after the task's run time (and after now)", "expire_at")
    singleton.applies(config, request)  # on_conflict only where the lambda makes the flow key a singleton
    debounced = debounce.of(config, request)
    if debounced is not None:
        debounce.first_due(debounced, due, now, request.expire_at)  # refuses an expire_at the burst would pass
    return Task(
        id=task_id_for(request.lambda_, request.key),
        lambda_=request.lambda_,
        collection=request.collection,
        priority=priority,
        payload=request.payload,
        status=TaskStatus.NEW,
        attempt=0,
        max_attempts=request.max_attempts or spec.max_attempts,
        scheduled_at=due,
        created_at=now,
        key=request.key,
        flow_key=request.flow_key,
        expire_at=request.expire_at,
        timeout_seconds=request.timeout_seconds,
        traceparent=request.traceparent,
    )


def fingerprint_of(config: StackConfig, request: ScheduleRequest) -> Fingerprint:
    """The request's fingerprint, a priority or max_attempts equal to the lambda's default taken as left out,
    and its times as UTC instants: the task is the same either way, so a repeat that names the default (or
    leaves out what the first named), or writes a time with another offset, is the same request. It carries
    the fingerprints earlier versions stored for it (the request as given; then with the defaults left out
    and the times as given): their tasks' repeats still match."""
    earlier = [request.fingerprint()]
    left_out = config.lambda_named(request.lambda_).defaults_left_out(request.priority, request.max_attempts)
    same = request
    if left_out != {"priority": request.priority, "max_attempts": request.max_attempts}:
        same = request.model_copy(update=left_out)
        earlier.append(same.fingerprint())
    in_utc = same.in_utc()
    current = earlier[-1] if in_utc is same else in_utc.fingerprint()  # a request naming neither: one digest
    return Fingerprint.of(current, *earlier)


class Scheduling:
    def __init__(self, store: TaskStore, config: StackConfig, clock: Clock = utcnow) -> None:
        self._store = store
        self._config = config
        self._clock = clock

    def schedule(self, request: ScheduleRequest, now: datetime | None = None) -> CreateResult:
        attributes: tracing.Attributes = {tracing.LAMBDA: request.lambda_}
        with tracing.span("atf schedule", "SERVER", attributes, parent=request.traceparent) as span:
            task = build_task(self._config, request, now or self._clock())
            span.set(tracing.TASK_ID, task.id)
            debounced, fingerprint = debounce.of(self._config, request), fingerprint_of(self._config, request)
            if singleton.applies(self._config, request):
                result = singleton.create_singleton(self._store, task, fingerprint, request.on_conflict)
            elif debounced is not None:
                result = debounce.schedule(self._store, task, fingerprint, debounced)
            else:
                result = self._store.create(task, fingerprint)
            if result.conflict:
                raise Conflict(f"key {request.key!r} was used for a different request", "key")
            return result

    def get(self, task_id: str, lambda_name: str | None = None) -> Task:
        """The task; with `lambda_name` (a lambda's own route), a task of another lambda is not found either, and
        a lambda the stack does not have is refused as unknown (a typo must not read as a missing task)."""
        if lambda_name is not None:
            self._config.lambda_named(lambda_name)
        task = self._store.get(task_id)
        if task is None or (lambda_name is not None and task.lambda_ != lambda_name):
            raise NotFound(f"no task {task_id!r}", "id")
        return task

    def cancel(self, task_id: str, reason: str = "cancelled by request", lambda_name: str | None = None) -> Task:
        task = self.get(task_id, lambda_name)
        if task.status is TaskStatus.CANCELLED:
            return task
        if not lifecycle.CANCEL.allows(task.status):
            raise Conflict(f"task {task_id} is {task.status.value}; only tasks not yet started can be cancelled", "id")
        outcome = self._store.transition(TaskRef.of(task), lifecycle.CANCEL, Change(now=self._clock(), reason=reason))
        if not outcome.applied:
            now_status = outcome.task.status.value if outcome.task else "gone"
            raise Conflict(f"task {task_id} moved to {now_status} while cancelling", "id")
        assert outcome.task is not None
        return outcome.task

    def amend(self, task_id: str, amendment: Amendment, lambda_name: str | None = None) -> Task:
        """Change the run time, priority or payload of a task no executor has claimed (Conflict once one has);
        with `lambda_name`, only a task of that lambda (another's is not found)."""
        task, now = self.get(task_id, lambda_name), self._clock()
        if amendment.priority is not None:
            check_priority(self._config, task.lambda_, amendment.priority)
        if amendment.run_at is not None:
            named = amendment.when_field
            check_run_at(amendment.run_at, now, named)
            if task.expire_at is not None and amendment.run_at >= task.expire_at:
                raise InputError(
                    f"the new run time is not before the task's expire_at ({task.expire_at:%Y-%m-%dT%H:%M:%SZ})", named
                )
        if lifecycle.amend_of(task.status) is None:
            raise Conflict(f"task {task_id} is {task.status.value}; only a task not yet claimed can be changed", "id")
        outcome = amend(self._store, task, amendment, now)
        if not outcome.applied or outcome.task is None:
            now_status = outcome.task.status.value if outcome.task else "gone"
            raise Conflict(f"task {task_id} moved to {now_status} while changing it: nothing changed", "id")
        return outcome.task
