"""Every call of the frontend API, defined once: what it sends where, what it checks first, what it returns.

Each is a plan (atf_sdk.transport): AtfClient runs it blocking, AsyncAtfClient awaited, so the two have
the same methods. Results are the core's own types (Task, Gate, DeadLetter, BulkResult, Schedule,
ChainView, ...), read back from JSON with pydantic, so a caller holds exactly what the server's core
returned. Input checked here before sending is refused with the errors the API would answer
(atf_core.errors, naming the field), never pydantic's own ValidationError, and nothing is sent.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from atf_core import tracing
from atf_core.api import (
    MAX_BATCH,
    MAX_EVENT_BODY_BYTES,
    BatchItem,
    BatchResult,
    BulkReprioritiseRequest,
    BulkRescheduleRequest,
    DeadLetterList,
    DeadLetterSelection,
    GateList,
    GateRequest,
    RedriveRequest,
    ScheduledTask,
    ScheduleList,
    ScheduleView,
    TaskAmendmentRequest,
    TaskSelection,
    in_an_event,
)
from atf_core.bulk import BulkChange
from atf_core.bulk_cursor import Action, Cursor
from atf_core.chains import ChainSpec, ChainView
from atf_core.deadletters import BulkResult, DeadLetter
from atf_core.errors import AtfError, InputError, input_error
from atf_core.recurrence import Schedule, ScheduleSpec
from atf_core.schema import STORED, Gate, GateAction, ScheduleRequest, Task, TaskStatus
from atf_core.stats import LambdaStats
from atf_core.vocabulary import MAX_BULK, MAX_DEAD_LETTER_ACTION
from atf_sdk import routes
from atf_sdk.transport import ApiClient, Plan, Sleep, api_call

# Answers are read as the server stored them (context STORED), as the core reads its items: a check a newer
# version puts on input (a collection of '..') does not refuse to show what an older one took.

Progress = Callable[[int], None]
Model = TypeVar("Model", bound=BaseModel)
_BULK_RESULT = TypeAdapter(BulkResult)
_BULK_CHANGE = TypeAdapter(BulkChange)
Statuses = Iterable[TaskStatus | str] | None
READ_AT_LEAST_S = 5.0  # a waited-for task's read may take this long (its retries) when less of the wait is left


class TaskFailed(Exception):
    """A task whose result was asked for ended without succeeding; `task` tells how (its errors, its reason)."""

    def __init__(self, task: Task) -> None:
        last = f": {task.last_error.type}: {task.last_error.message}" if task.last_error else ""
        super().__init__(f"task {task.id} ended {task.status.value}{last}")
        self.task = task


def checked(model: type[Model], value: Model | Any, within: str | None = None) -> Model:
    """`value` as `model` (a model given as one is taken as it is); bad input raises the
    atf_core.errors class the API would answer, with the field (inside `within`, e.g. tasks[3])."""
    if isinstance(value, model):
        return value
    try:
        return model.model_validate(value)
    except ValidationError as error:
        raise input_error(error, within) from None


def traced(request: ScheduleRequest, traceparent: str | None) -> ScheduleRequest:
    """The request carrying the trace context it is sent in, unless the caller gave one."""
    if request.traceparent is not None or traceparent is None:
        return request
    return request.model_copy(update={"traceparent": traceparent})


def keyed(request: ScheduleRequest) -> ScheduleRequest:
    """The request with an idempotency key, so resending it cannot schedule it twice."""
    return request if request.key is not None else request.model_copy(update={"key": uuid.uuid4().hex})


class TaskCalls(ApiClient):
    @api_call
    def schedule(
        self,
        lambda_name: str,
        payload: dict[str, Any] | None = None,
        *,
        collection: str | None = None,
        priority: str | None = None,
        run_at: datetime | None = None,
        delay_seconds: float | None = None,
        key: str | None = None,
        max_attempts: int | None = None,
        expire_at: datetime | None = None,
        timeout_seconds: float | None = None,
        flow_key: str | None = None,
        on_conflict: str | None = None,
    ) -> Plan[ScheduledTask]:
        """Schedule a task of `lambda_name` (an idempotency key is generated when none is given; `flow_key`
        is the flow-control key the lambda's key_limits apply to; where they make it a singleton, `on_conflict`
        "refuse" (the default: FlowKeyBusy while another task holds the key) or "replace" its waiting holder)."""
        fields = {
            "lambda": lambda_name,
            "payload": {} if payload is None else payload,  # anything else given is checked, never replaced
            "collection": collection,
            "priority": priority,
            "run_at": run_at,
            "delay_seconds": delay_seconds,
            "key": key,
            "max_attempts": max_attempts,
            "expire_at": expire_at,
            "timeout_seconds": timeout_seconds,
            "flow_key": flow_key,
            "on_conflict": on_conflict,
        }
        request = checked(ScheduleRequest, {k: v for k, v in fields.items() if v is not None})
        return (yield from self._submitted(request))

    @api_call
    def submit(self, request: ScheduleRequest | dict[str, Any]) -> Plan[ScheduledTask]:
        """Schedule a task described by a ScheduleRequest (a key is added when it has none)."""
        return (yield from self._submitted(checked(ScheduleRequest, request)))

    def _submitted(self, request: ScheduleRequest) -> Plan[ScheduledTask]:
        with tracing.outgoing("atf schedule", {tracing.LAMBDA: request.lambda_}) as span:
            body = _wire(traced(keyed(request), span.traceparent))
            reply = yield from self._request("POST", routes.tasks(request.lambda_), body)
            scheduled = ScheduledTask.model_validate(reply, context=STORED)
            span.set(tracing.TASK_ID, scheduled.id)
            return scheduled

    @api_call
    def schedule_many(
        self, requests: Iterable[ScheduleRequest | dict[str, Any]], on_progress: Progress | None = None
    ) -> Plan[list[BatchItem]]:
        """Schedule tasks in batches of up to 100 (fewer where their payloads would make a request larger
        than the API takes); one result per task, in order. Each task is checked here first, so a malformed
        one fails before anything is sent; with more than one batch, the API checks every batch before the
        first is written (a dry run), so a task it refuses (an unknown lambda or priority) fails the same way."""
        tasks = [keyed(checked(ScheduleRequest, r, f"tasks[{i}]")) for i, r in enumerate(requests)]
        batches = list(_batches(tasks))
        if len(batches) > 1:
            for start, chunk in batches:
                yield from self._dry_run(tasks, list(range(start, start + len(chunk))))
            for indices in _keys_across_batches(tasks, batches):
                yield from self._dry_run(tasks, indices)
        results: list[BatchItem] = []
        for start, chunk in batches:
            try:
                batch = yield from self._batch(chunk, start)
            except AtfError as error:  # an outage after the checks: say what was written before it
                if start:
                    error.add_note(f"tasks[0] to tasks[{start - 1}] were scheduled before it")
                raise
            results += [item.model_copy(update={"index": start + item.index}) for item in batch]
            if on_progress:
                on_progress(len(chunk))
        return results

    def _dry_run(self, tasks: Sequence[ScheduleRequest], indices: list[int]) -> Plan[None]:
        """The API's checks of the tasks at `indices`, as one batch, writing nothing."""
        body = {"tasks": [_wire(tasks[i]) for i in indices], "dry_run": True}
        path = routes.batch(one_lambda([tasks[i].lambda_ for i in indices]))
        try:
            yield from self._request("POST", path, body)
        except AtfError as error:
            raise _renumbered(error, indices) from None

    def _batch(self, tasks: Sequence[ScheduleRequest], offset: int) -> Plan[list[BatchItem]]:
        """One batch, resending the items the store throttled until they are written or attempts run out."""
        done: dict[int, BatchItem] = {}
        pending = list(range(len(tasks)))
        with tracing.outgoing("atf schedule", {tracing.BATCH_SIZE: len(tasks)}) as span:
            tasks = [traced(t, span.traceparent) for t in tasks]
            for attempt in range(1, self._retry.attempts + 1):
                body = {"tasks": [_wire(tasks[i]) for i in pending]}
                path = routes.batch(one_lambda([tasks[i].lambda_ for i in pending]))
                try:
                    reply = BatchResult.model_validate((yield from self._request("POST", path, body)), context=STORED)
                except AtfError as error:
                    raise _renumbered(error, [offset + i for i in pending]) from None
                for item in reply.results:
                    done[pending[item.index]] = item.model_copy(update={"index": pending[item.index]})
                pending = [i for i in pending if done[i].retriable]
                if not pending or attempt == self._retry.attempts:
                    break
                yield Sleep(self._retry.delay(attempt))
            span.set(tracing.TASK_IDS, [item.task.id for item in done.values() if item.task is not None])
        return [done[i] for i in range(len(tasks))]

    @api_call
    def get(self, task_id: str, *, lambda_name: str | None = None) -> Plan[Task]:
        """The task as it stands now: status, attempts, timestamps, every failed attempt's error.
        Name its lambda to call that lambda's route (all a principal granted that lambda only may call)."""
        return (yield from self._task("GET", task_id, lambda_name))

    def _task(self, method: str, task_id: str, lambda_name: str | None, deadline: float | None = None) -> Plan[Task]:
        return Task.model_validate(
            (yield from self._request(method, routes.task(task_id, lambda_name), None, deadline)), context=STORED
        )

    @api_call
    def wait(
        self, task_id: str, timeout_s: float = 60.0, poll_s: float = 0.5, *, lambda_name: str | None = None
    ) -> Plan[Task]:
        """The task once it has settled (ended, or a dead letter); TimeoutError if it has not within timeout_s."""
        return (yield from self._settled(task_id, _waitable(timeout_s, "timeout_s"), poll_s, lambda_name))

    def _settled(self, task_id: str, timeout_s: float, poll_s: float, lambda_name: str | None) -> Plan[Task]:
        deadline = time.monotonic() + timeout_s
        while not (task := (yield from self._polled(task_id, lambda_name, deadline))).status.settled:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"task {task_id} is still {task.status.value} after {timeout_s:g} s")
            yield Sleep(min(poll_s, left))
        return task

    def _polled(self, task_id: str, lambda_name: str | None, deadline: float) -> Plan[Task]:
        """One read of a waited-for task, its retries within the wait (a silent API held a 1 s wait for minutes),
        though never less than READ_AT_LEAST_S: a wait of 0 still reads the task once."""
        within = max(deadline, time.monotonic() + READ_AT_LEAST_S)
        return (yield from self._task("GET", task_id, lambda_name, within))

    @api_call
    def result(
        self, task_id: str, wait: float = 0.0, poll_s: float = 0.5, *, lambda_name: str | None = None
    ) -> Plan[Any]:
        """What the task's callback returned (None if nothing), once it succeeded, waiting up to `wait`
        seconds for a final state; TaskFailed if it ended otherwise, TimeoutError if it has not ended."""
        task = yield from self._settled(task_id, _waitable(wait, "wait"), poll_s, lambda_name)
        if task.status is not TaskStatus.SUCCESS:
            raise TaskFailed(task)
        return task.result

    @api_call
    def cancel(self, task_id: str, *, lambda_name: str | None = None) -> Plan[Task]:
        """Cancel a task that has not started (Conflict once it has)."""
        return (yield from self._task("DELETE", task_id, lambda_name))


class ChangeCalls(ApiClient):
    """Changes to tasks no executor has claimed yet: one by id, or a selection at once (with a dry run)."""

    @api_call
    def change(
        self,
        task_id: str,
        *,
        run_at: datetime | None = None,
        delay_seconds: float | None = None,
        priority: str | None = None,
        payload: dict[str, Any] | None = None,
        lambda_name: str | None = None,
    ) -> Plan[Task]:
        """Change a waiting task's run time, priority or payload (the whole payload); Conflict once it is claimed."""
        fields = {"run_at": run_at, "delay_seconds": delay_seconds, "priority": priority, "payload": payload}
        request = checked(TaskAmendmentRequest, {k: v for k, v in fields.items() if v is not None})
        request.amendment(datetime.now(UTC))  # nothing to change, or two times: refused before sending
        body = request.model_dump(mode="json", exclude_none=True)
        return Task.model_validate(
            (yield from self._request("POST", routes.task_change(task_id, lambda_name), body)), context=STORED
        )

    @api_call
    def bulk_cancel(
        self,
        *,
        lambda_name: str | None = None,
        collection: str | None = None,
        flow_key: str | None = None,
        status: Statuses = None,
        since: datetime | None = None,
        until: datetime | None = None,
        all: bool = False,
        limit: int = MAX_BULK,
        dry_run: bool = False,
        per_second: float | None = None,
        cursor: str | None = None,
    ) -> Plan[BulkChange]:
        """Cancel the waiting tasks of a selection (the soonest `limit`); a selection with no filter needs all=True.
        The dry run lists them and changes nothing; per_second paces the cancellations. An answer with `more`
        has a `cursor`: pass it, with the same selection, to go on where it stopped (each bulk call alike)."""
        selection = _selection(locals())
        return (yield from self._bulk("cancel", checked(TaskSelection, selection)))

    @api_call
    def bulk_reschedule(
        self,
        *,
        run_at: datetime | None = None,
        delay_seconds: float | None = None,
        lambda_name: str | None = None,
        collection: str | None = None,
        flow_key: str | None = None,
        status: Statuses = None,
        since: datetime | None = None,
        until: datetime | None = None,
        all: bool = False,
        limit: int = MAX_BULK,
        dry_run: bool = False,
        per_second: float | None = None,
        cursor: str | None = None,
    ) -> Plan[BulkChange]:
        """Run the waiting tasks of a selection at run_at (or delay_seconds from now), the n-th n / per_second
        seconds later; with the cursor of an earlier answer, the drip goes on from where it left off (give the
        same run_at: a delay counts from each call's now)."""
        request = checked(BulkRescheduleRequest, _selection(locals()))
        request.when(datetime.now(UTC))
        return (yield from self._bulk("reschedule", request))

    @api_call
    def bulk_reprioritise(
        self,
        priority: str,
        *,
        lambda_name: str | None = None,
        collection: str | None = None,
        flow_key: str | None = None,
        status: Statuses = None,
        since: datetime | None = None,
        until: datetime | None = None,
        all: bool = False,
        limit: int = MAX_BULK,
        dry_run: bool = False,
        per_second: float | None = None,
        cursor: str | None = None,
    ) -> Plan[BulkChange]:
        """Move the waiting tasks of a selection to `priority`'s queue, the n-th no sooner than n / per_second
        seconds from now."""
        return (yield from self._bulk("reprioritise", checked(BulkReprioritiseRequest, _selection(locals()))))

    def _bulk(self, action: Action, request: TaskSelection) -> Plan[BulkChange]:
        request.filter()  # a selection of everything without all=True is refused before sending
        Cursor.decode(
            request.cursor, action, request.dry_run
        )  # so is another action's or run's cursor, or a mangled one
        body = request.model_dump(mode="json", by_alias=True, exclude_none=True)
        reply = yield from self._request("POST", routes.bulk(action, request.lambda_), body)
        return _BULK_CHANGE.validate_python(reply, context=STORED)


def _selection(arguments: dict[str, Any]) -> dict[str, Any]:
    """A bulk call's arguments as the request's fields (those given)."""
    fields = {k: v for k, v in arguments.items() if k != "self" and v is not None}
    if "lambda_name" in fields:
        fields["lambda"] = fields.pop("lambda_name")
    if "status" in fields:
        fields["status"] = [fields["status"]] if isinstance(fields["status"], str) else list(fields["status"])
    return fields


class GateCalls(ApiClient):
    @api_call
    def pause(
        self, lambda_name: str, collection: str | None = None, *, until: datetime | None = None, reason: str = ""
    ) -> Plan[Gate]:
        """Hold a lambda's tasks (one collection's, when named) until resumed, or until `until`."""
        fields = {"action": GateAction.PAUSE, "until": until, "reason": reason}
        return (yield from self._gate(lambda_name, collection, fields))

    @api_call
    def drop(
        self, lambda_name: str, collection: str | None = None, *, until: datetime | None = None, reason: str = ""
    ) -> Plan[Gate]:
        """Drop a lambda's tasks (one collection's, when named) instead of running them, until resumed."""
        fields = {"action": GateAction.DROP, "until": until, "reason": reason}
        return (yield from self._gate(lambda_name, collection, fields))

    def _gate(self, lambda_name: str, collection: str | None, fields: dict[str, Any]) -> Plan[Gate]:
        body = checked(GateRequest, fields).model_dump(mode="json", exclude_none=True)
        return Gate.model_validate(
            (yield from self._request("PUT", routes.gate(lambda_name, collection), body)), context=STORED
        )

    @api_call
    def resume(self, lambda_name: str, collection: str | None = None) -> Plan[None]:
        """Lift a gate (NotFound when there is none)."""
        yield from self._request("DELETE", routes.gate(lambda_name, collection))

    @api_call
    def gates(self) -> Plan[list[Gate]]:
        return GateList.model_validate((yield from self._request("GET", routes.GATES)), context=STORED).gates

    @api_call
    def stats(self, lambda_name: str) -> Plan[LambdaStats]:
        """Tasks by state and priority, the oldest due, the start lag, limits and dead letters of a lambda."""
        return LambdaStats.model_validate((yield from self._request("GET", routes.stats(lambda_name))), context=STORED)

    @api_call
    def openapi(self) -> Plan[dict[str, Any]]:
        document: dict[str, Any] = yield from self._request("GET", routes.OPENAPI)
        return document


class DeadLetterCalls(ApiClient):
    @api_call
    def dead_letters(
        self,
        lambda_name: str,
        *,
        collection: str | None = None,
        error_type: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 100,
    ) -> Plan[list[DeadLetter]]:
        """A lambda's oldest `limit` dead letters, oldest first; each task's errors are on client.get(id).errors.
        Whether more follow, and the next page: dead_letter_page."""
        filters = {"collection": collection, "error_type": error_type, "since": since, "until": until, "limit": limit}
        return (yield from self._letters(lambda_name, filters)).dead_letters

    @api_call
    def dead_letter_page(
        self,
        lambda_name: str,
        *,
        collection: str | None = None,
        error_type: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> Plan[DeadLetterList]:
        """A page of a lambda's dead letters, oldest first, from after `after` (a page's `next`); its `next`
        is None at the end."""
        filters = {"collection": collection, "error_type": error_type, "since": since, "until": until, "limit": limit}
        return (yield from self._letters(lambda_name, {**filters, "after": after}))

    def _letters(self, lambda_name: str, query: dict[str, Any]) -> Plan[DeadLetterList]:
        path = routes.with_query(routes.dead_letters(lambda_name), query)
        return DeadLetterList.model_validate((yield from self._request("GET", path)), context=STORED)

    @api_call
    def redrive(
        self,
        lambda_name: str,
        *,
        collection: str | None = None,
        error_type: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = MAX_DEAD_LETTER_ACTION,
        dry_run: bool = False,
        per_second: float | None = None,
        budget: int | None = None,
        after: str | None = None,
        ids: Sequence[str] | None = None,
    ) -> Plan[BulkResult]:
        """Back to new with `budget` more attempts each (default: the lambda's max_attempts), the n-th
        starting n / per_second seconds from now; the oldest `limit` (at most 1000) of the selection, past
        `after` (an earlier result's `next`: the letters it reached, those it left dead too, are skipped). Pass
        that result's `until` with it: letters it redrove that died again are then not taken again. `ids`
        (at most 100) names the dead letters instead of filters: all of them must be the lambda's dead letters
        (NotFound naming `ids[i]`, nothing changed)."""
        filters = _dead_letter_filters(collection, error_type, since, until, limit, ids)
        fields = {**filters, "dry_run": dry_run, "per_second": per_second, "budget": budget, "after": after}
        return (yield from self._select(lambda_name, "redrive", checked(RedriveRequest, fields)))

    @api_call
    def discard(
        self,
        lambda_name: str,
        *,
        collection: str | None = None,
        error_type: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = MAX_DEAD_LETTER_ACTION,
        dry_run: bool = False,
        after: str | None = None,
        ids: Sequence[str] | None = None,
    ) -> Plan[BulkResult]:
        """End the selected dead letters as fatal_failure (past `after`, an earlier result's `next`, through its
        `until`; or those named by `ids`, as redrive takes them)."""
        filters = _dead_letter_filters(collection, error_type, since, until, limit, ids)
        request = checked(DeadLetterSelection, {**filters, "dry_run": dry_run, "after": after})
        return (yield from self._select(lambda_name, "discard", request))

    def _select(self, lambda_name: str, action: str, request: DeadLetterSelection) -> Plan[BulkResult]:
        body = request.model_dump(mode="json", exclude_none=True)
        reply = yield from self._request("POST", routes.dead_letters(lambda_name, action), body)
        return _BULK_RESULT.validate_python(reply, context=STORED)


def _dead_letter_filters(
    collection: str | None,
    error_type: str | None,
    since: datetime | None,
    until: datetime | None,
    limit: int,
    ids: Sequence[str] | None,
) -> dict[str, Any]:
    chosen = None if ids is None else list(ids)  # a tuple or a generator is sent as the list the API takes
    return {
        "collection": collection,
        "error_type": error_type,
        "since": since,
        "until": until,
        "limit": limit,
        "ids": chosen,
    }


class ScheduleCalls(ApiClient):
    @api_call
    def put_schedule(self, name: str, spec: ScheduleSpec | dict[str, Any]) -> Plan[Schedule]:
        """Create or replace a schedule (a dict is checked as a ScheduleSpec first), on its lambda's route."""
        given = checked(ScheduleSpec, spec)
        body = given.model_dump(mode="json", by_alias=True, exclude_none=True)
        path = routes.schedule(name, lambda_name=given.lambda_)
        return Schedule.model_validate((yield from self._request("PUT", path, body)), context=STORED)

    @api_call
    def schedules(self, lambda_name: str | None = None) -> Plan[list[Schedule]]:
        """Every schedule, or a lambda's, by name: the API answers a page at a time (as many as a Lambda
        response holds), and this reads on to the last."""
        found: list[Schedule] = []
        after: str | None = None
        while True:
            path = routes.with_query(routes.schedules(lambda_name), {"after": after})
            page = ScheduleList.model_validate((yield from self._request("GET", path)), context=STORED)
            found += page.schedules
            if page.next is None:
                return found
            after = page.next

    @api_call
    def get_schedule(self, name: str, upcoming: int = 5, *, lambda_name: str | None = None) -> Plan[ScheduleView]:
        """The schedule with its next `upcoming` occurrences (none while paused)."""
        path = routes.with_query(routes.schedule(name, lambda_name=lambda_name), {"upcoming": upcoming})
        return ScheduleView.model_validate((yield from self._request("GET", path)), context=STORED)

    @api_call
    def delete_schedule(self, name: str, *, lambda_name: str | None = None) -> Plan[None]:
        yield from self._request("DELETE", routes.schedule(name, lambda_name=lambda_name))

    # Pausing takes no fields, but an empty object keeps the POST acceptable to API
    # Gateway's body validation (every POST there is checked as a JSON object).
    @api_call
    def pause_schedule(self, name: str, *, lambda_name: str | None = None) -> Plan[Schedule]:
        path = routes.schedule(name, "pause", lambda_name)
        return Schedule.model_validate((yield from self._request("POST", path, {})), context=STORED)

    @api_call
    def resume_schedule(self, name: str, *, lambda_name: str | None = None) -> Plan[Schedule]:
        """Resume from the next occurrence; what fell due while paused follows the catch-up policy."""
        path = routes.schedule(name, "resume", lambda_name)
        return Schedule.model_validate((yield from self._request("POST", path, {})), context=STORED)


class ChainCalls(ApiClient):
    @api_call
    def create_chain(self, spec: ChainSpec | dict[str, Any]) -> Plan[ChainView]:
        """Create a chain; one without a key gets one here, so a retried request finds its chain."""
        chain = checked(ChainSpec, spec)
        if chain.key is None:
            chain = chain.model_copy(update={"key": uuid.uuid4().hex})
        body = chain.model_dump(mode="json", by_alias=True, exclude_none=True)
        path = routes.chains(one_lambda([link.lambda_ for link in chain.links]))
        return ChainView.model_validate((yield from self._request("POST", path, body)), context=STORED)

    # A chain whose links all run one lambda is that lambda's: name it to use its routes.
    @api_call
    def get_chain(self, chain_id: str, *, lambda_name: str | None = None) -> Plan[ChainView]:
        return ChainView.model_validate(
            (yield from self._request("GET", routes.chain(chain_id, lambda_name))), context=STORED
        )

    @api_call
    def cancel_chain(self, chain_id: str, *, lambda_name: str | None = None) -> Plan[ChainView]:
        """Cancel the links not started; running links finish."""
        return ChainView.model_validate(
            (yield from self._request("DELETE", routes.chain(chain_id, lambda_name))), context=STORED
        )

    @api_call
    def retry_link(
        self, chain_id: str, link: str, budget: int | None = None, *, lambda_name: str | None = None
    ) -> Plan[ChainView]:
        """Run a dead-letter link again (Conflict for a link in any other state); its chain then carries on."""
        body = {} if budget is None else {"budget": budget}
        path = routes.link_retry(chain_id, link, lambda_name)
        return ChainView.model_validate((yield from self._request("POST", path, body)), context=STORED)


class Calls(TaskCalls, ChangeCalls, GateCalls, DeadLetterCalls, ScheduleCalls, ChainCalls):
    """Every call of the API; a client is these plus a driver (Blocking or Asynchronous)."""


def _waitable(seconds: float, argument: str) -> float:
    """A wait in seconds, 0 or more (0 reads once): a negative one (or NaN) would read as having timed out."""
    if not seconds >= 0:  # NaN too
        raise InputError(f"{argument}: {seconds!r} is not a number of seconds, 0 or more", argument)
    return seconds


def one_lambda(names: Iterable[str]) -> str | None:
    """The lambda a request is all about, so it takes that lambda's route; None when it spans several."""
    distinct = set(names)
    return distinct.pop() if len(distinct) == 1 else None


def _wire(request: ScheduleRequest) -> dict[str, Any]:
    return request.model_dump(mode="json", by_alias=True, exclude_none=True)


def _cost(task: ScheduleRequest) -> int:
    """What a task adds to a batch's body as its Lambda event counts it."""
    return in_an_event(json.dumps(_wire(task)))  # as the transport writes it; its quotes pay for the comma


def _batches(tasks: list[ScheduleRequest]) -> Iterator[tuple[int, list[ScheduleRequest]]]:
    """`tasks` in order, as (first index, batch): at most MAX_BATCH a batch, and a batch's body within
    MAX_EVENT_BODY_BYTES as its Lambda event counts it (a task's payload alone may be 256 KiB)."""
    start, size = 0, 0
    for index, task in enumerate(tasks):
        cost = _cost(task)
        if index > start and (index - start == MAX_BATCH or size + cost > MAX_EVENT_BODY_BYTES):
            yield start, tasks[start:index]
            start, size = index, 0
        size += cost
    if tasks:
        yield start, tasks[start:]


def _keys_across_batches(
    tasks: list[ScheduleRequest], batches: list[tuple[int, list[ScheduleRequest]]]
) -> Iterator[list[int]]:
    """Batches for the API to check a key used in more than one batch: its first task with each later one that
    is not plainly the same request. The API checks a reused key within one batch only, and only it knows
    whether two requests differ (one naming the lambda's default priority is the same as one leaving it out)."""
    batch_of = {start + i: start for start, chunk in batches for i in range(len(chunk))}
    first: dict[tuple[str, str | None], int] = {}
    later: dict[int, list[int]] = {}
    for index, task in enumerate(tasks):
        leader = first.setdefault((task.lambda_, task.key), index)
        if batch_of[leader] != batch_of[index] and tasks[leader].fingerprint() != task.fingerprint():
            later.setdefault(leader, []).append(index)
    for leader, others in later.items():
        yield from _beside(tasks, leader, others)


def _beside(tasks: list[ScheduleRequest], leader: int, others: list[int]) -> Iterator[list[int]]:
    """`others` in batches that each start with `leader`, within a batch's count and size."""
    chunk: list[int] = []
    size = _cost(tasks[leader])
    for index in others:
        if chunk and (len(chunk) + 1 == MAX_BATCH or size + _cost(tasks[index]) > MAX_EVENT_BODY_BYTES):
            yield [leader, *chunk]
            chunk, size = [], _cost(tasks[leader])
        chunk.append(index)
        size += _cost(tasks[index])
    if chunk:
        yield [leader, *chunk]


def _renumbered(error: AtfError, indices: list[int]) -> AtfError:
    """A batch error names tasks[i] of what was sent, in its field and message; name the caller's index instead."""

    def caller_index(match: re.Match[str]) -> str:
        sent = int(match.group(1))
        return f"tasks[{indices[sent]}]" if sent < len(indices) else match.group(0)

    if error.field:
        error.field = re.sub(r"^tasks\[(\d+)\]", caller_index, error.field)
    error.message = re.sub(r"\btasks\[(\d+)\]", caller_index, error.message)
    return error
