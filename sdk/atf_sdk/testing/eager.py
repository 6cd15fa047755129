"""Eager mode: run a team's callback in this process, as an executor would, with no AWS at all.

    eager = Eager(lambdas, StackConfig.from_file(Path("stack.json")))
    outcome = eager.run("charge", {"order": 7}, attempt=3)
    assert outcome.status is TaskStatus.DEAD_LETTER and isinstance(outcome.raised, Fatal)

The task is built as the frontend builds it (atf_core.tasks.build_task: the lambda, priority and
payload checked against the configuration, with the errors the API would answer), claimed at the
attempt asked for, and run by the executor's own TaskRunner: the TaskContext the callback gets, and
what Retry, Fatal, another exception or the last attempt make of the task, are the executor's. Only
the task store differs: the runner's one write is recorded instead of sent, and becomes the AttemptResult.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NoReturn, TypedDict, Unpack

from atf_core.config import LambdaSpec, StackConfig
from atf_core.errors import InputError
from atf_core.lifecycle import Transition
from atf_core.schema import Gate, ScheduleRequest, Task, TaskError, TaskStatus, utcnow
from atf_core.store.base import Change, CreateResult, DueEntry, MergeRecord, ReadPast, TaskRef, TaskStore
from atf_core.store.base import Outcome as Written
from atf_core.tasks import build_task
from atf_sdk.operations import checked
from atf_sdk.worker.executor import TaskRunner
from atf_sdk.worker.heartbeat import Heartbeats
from atf_sdk.worker.registry import Callback, Lambdas, TaskContext
from atf_sdk.worker.time_limits import TaskTimeout


class TaskFields(TypedDict, total=False):
    """What a test may say about the task besides its lambda and payload (the rest is the frontend's)."""

    attempt: int  # this execution's number, from 1: the fencing token (default 1)
    max_attempts: int  # default: the lambda's
    collection: str
    priority: str  # default: the lambda's default priority
    key: str
    run_at: datetime  # the task's scheduled time (default: now)
    task_id: str  # default: the id the frontend would give (derived from the key, when there is one)
    timeout_seconds: float  # the task's own time limit (default: the lambda's); enforced on async def callbacks


@dataclass(frozen=True)
class AttemptResult:
    """How one attempt ended, as the executor would record it."""

    status: TaskStatus  # success, retriable_failure, dead_letter or fatal_failure
    context: TaskContext  # what the callback was given
    value: Any = None  # what it returned
    raised: Exception | None = None  # what it raised: Retry, Fatal, or any other exception
    error: TaskError | None = None  # the error the task's history keeps for this attempt
    retry_in: float | None = None  # seconds to the next attempt: Retry's `after`, or the lambda's backoff

    @property
    def succeeded(self) -> bool:
        return self.status is TaskStatus.SUCCESS


class Eager:
    """A team's callbacks, run in this process; `config` gives the lambdas' priorities, attempts,
    backoff and dead-letter choice (without it, each lambda has the framework's defaults)."""

    def __init__(self, lambdas: Lambdas, config: StackConfig | None = None) -> None:
        self._lambdas = lambdas
        self._config = config

    def task(self, lambda_name: str, payload: dict[str, Any] | None = None, **fields: Unpack[TaskFields]) -> Task:
        """The task as an executor gets it from its controller: claimed, at `attempt` (default 1)."""
        attempt, task_id = fields.pop("attempt", 1), fields.pop("task_id", None)
        asked = {"lambda": lambda_name, "payload": {} if payload is None else payload, **fields}
        request = checked(ScheduleRequest, asked)
        now = utcnow()
        task = build_task(self._config_for(lambda_name), request, now)
        if not 1 <= attempt <= task.max_attempts:
            raise InputError(f"attempt: {attempt} is not between 1 and max_attempts ({task.max_attempts})", "attempt")
        claimed = {"status": TaskStatus.CLAIMED, "attempt": attempt, "claimed_at": now}
        return task.model_copy(update={**claimed, "id": task_id or task.id})

    def context(
        self, lambda_name: str, payload: dict[str, Any] | None = None, **fields: Unpack[TaskFields]
    ) -> TaskContext:
        """What the callback is given for that task, to call it yourself."""
        return TaskContext.of(self.task(lambda_name, payload, **fields))

    def run(
        self, lambda_name: str, payload: dict[str, Any] | None = None, **fields: Unpack[TaskFields]
    ) -> AttemptResult:
        """Run the registered callback once, as an executor would; how it ended."""
        task = self.task(lambda_name, payload, **fields)
        config = self._config_for(lambda_name)
        seen = _Seen(self._callback(lambda_name), config.lambdas[lambda_name].time_limit(task.timeout_seconds))
        store = _Recorder()
        heartbeats = Heartbeats(store, config.timeouts, terminate=_lease_lost)  # tracks the task; never beats
        TaskRunner(store, config, lambda_name, seen, heartbeats).run(task)
        transition, change = store.written
        delay = (change.next_at - change.now).total_seconds() if change.next_at is not None else None
        return AttemptResult(
            status=transition.target,
            context=seen.context or TaskContext.of(task),
            value=seen.value,
            raised=seen.raised,
            error=change.error,
            retry_in=delay if transition.target is TaskStatus.RETRIABLE_FAILURE else None,
        )

    def _config_for(self, lambda_name: str) -> StackConfig:
        return self._config or StackConfig(lambdas={lambda_name: LambdaSpec()})

    def _callback(self, lambda_name: str) -> Callback:
        if lambda_name not in self._lambdas.names:
            raise LookupError(f"no callback registered for {lambda_name!r}; registered: {self._lambdas.names}")
        return self._lambdas.get(lambda_name)


class _Seen:
    """The callback, watched: what it was given, returned and raised."""

    def __init__(self, callback: Callback, limit_s: float | None) -> None:
        self._callback = callback
        self._limit_s = limit_s
        self.context: TaskContext | None = None
        self.value: Any = None
        self.raised: Exception | None = None

    def __call__(self, context: TaskContext) -> Any:
        self.context = context
        try:
            result = self._callback(context)
        except Exception as error:
            self.raised = error
            raise
        if inspect.isawaitable(result):  # the runner awaits it, within the attempt's time limit
            return self._awaited(result)
        self.value = result
        return result

    async def _awaited(self, awaitable: Awaitable[Any]) -> Any:
        try:
            self.value = await awaitable
        except asyncio.CancelledError:  # cancelled at its time limit: the runner raises TaskTimeout
            self.raised = TaskTimeout(self._limit_s or 0.0)
            raise
        except Exception as error:
            self.raised = error
            raise
        return self.value


def _lease_lost(reason: str) -> NoReturn:
    raise RuntimeError(f"eager run: {reason}")


class _Recorder(TaskStore):
    """Takes the runner's one write (the attempt's result) and keeps it; nothing else is asked of it."""

    def __init__(self) -> None:
        self._written: list[tuple[Transition, Change]] = []

    @property
    def written(self) -> tuple[Transition, Change]:
        if len(self._written) != 1:
            raise AssertionError(f"the executor wrote {len(self._written)} results for one attempt")
        return self._written[0]

    def transition(self, task: TaskRef, transition: Transition, change: Change) -> Written:
        self._written.append((transition, change))
        return Written(applied=True, task=None)

    def create(self, task: Task, fingerprint: str) -> CreateResult:
        _unused()

    def get(self, task_id: str) -> Task | None:
        _unused()

    def key_holder(self, lambda_name: str, flow_key: str) -> str | None:
        _unused()

    def create_holding(
        self, task: Task, fingerprint: str, held_by: str | None, cancel: Task | None
    ) -> CreateResult | None:
        _unused()

    def merge_record(self, record_id: str) -> MergeRecord | None:
        _unused()

    def merge(self, task: TaskRef, transition: Transition, change: Change, record: MergeRecord) -> bool:
        _unused()

    def redrive_holding(self, task: TaskRef, change: Change, held_by: str | None) -> bool | None:
        _unused()

    def get_many(self, task_ids: Sequence[str], consistent: bool = True) -> list[Task]:
        _unused()

    def due(
        self, partition: str, up_to: datetime, skip_collections: Any = (), first_page: int | None = None
    ) -> Iterator[DueEntry]:
        _unused()

    def read_past(
        self,
        partition: str,
        up_to: datetime,
        flows: Any,
        skip_collections: Any = (),
        since_ms: int | None = None,
        limit: int = 100,
    ) -> ReadPast:
        _unused()

    def entries(
        self, partition: str, low: datetime, high: datetime, equal: dict[str, str] | None = None
    ) -> Iterator[DueEntry]:
        _unused()

    def gates(self) -> list[Gate]:
        _unused()

    def put_gate(self, gate: Gate) -> None:
        _unused()

    def delete_gate(self, lambda_name: str, collection: str | None) -> bool:
        _unused()


def _unused() -> NoReturn:
    raise NotImplementedError("an eager run writes one result and reads nothing from the store")
