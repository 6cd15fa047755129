"""The frontend API's wire models: what it accepts besides ScheduleRequest, and what it returns.

Defined once here because two sides read them: the frontend Lambda (which
only has this layer) and the SDK's client. Task and Gate records are the
schema's own models; dead letters, schedules and chains travel as their core
modules' own types (DeadLetter, BulkResult, ScheduleSpec, Schedule, ChainSpec,
ChainView), wrapped here only where a list or an extra field needs a home.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from atf_core.amend import Amendment
from atf_core.bulk import TaskFilter, task_filter
from atf_core.deadletters import (
    POSITION_PATTERN,
    DeadLetter,
    DeadLetterFilter,
    DeadLetterPage,
    page_next,
    position_of,
)
from atf_core.errors import InputError
from atf_core.recurrence import Schedule
from atf_core.schema import (
    COLLECTION_PATTERN,
    FLOW_KEY_PATTERN,
    MAX_SCHEDULE_AHEAD,
    NAME_PATTERN,
    Gate,
    GateAction,
    JsonBool,
    JsonInt,
    JsonNumber,
    Moment,
    Payload,
    ScheduleRequest,
    TaskStatus,
    utcnow,
)
from atf_core.store.positions import Position
from atf_core.vocabulary import MAX_BULK, MAX_CHOSEN_DEAD_LETTERS, MAX_DEAD_LETTER_ACTION

MAX_BATCH = 100
MAX_DEAD_LETTER_LIST = 1000
MAX_SCHEDULE_PAGE = 100
MAX_CURSOR = 2048  # a bulk cursor is some 100 characters and a task id; anything far longer is not one
# The frontend is a Lambda function: a request reaches it as an event holding its body as a JSON string, and
# its answer leaves it as a response holding the body the same way. Lambda refuses a synchronous invocation
# whose event or response is over 6 MiB, below API Gateway's own 10 MB (a batch of 100 tasks may be 25 MB;
# a list of 25 schedules of full payloads is over it). So a body is kept within MAX_EVENT_BODY_BYTES as an
# event counts it: the SDK's batches, the schedules' pages. The rest is room for the headers (there twice),
# the request's context and each batched task's traceparent.
MAX_EVENT_BYTES = 6 * 1024 * 1024
MAX_EVENT_BODY_BYTES = MAX_EVENT_BYTES - 64 * 1024


def in_an_event(body: str) -> int:
    """The bytes `body` takes in its Lambda event or response: a JSON string, its quotes and backslashes
    escaped (and, as Python's json writes it, every non-ASCII character as a \\u escape)."""
    return len(json.dumps(body).encode())


class ErrorBody(BaseModel):
    """Every 4xx and 5xx the API itself answers."""

    code: str = Field(description="Machine-readable, e.g. unknown_lambda, missing_field, conflict.")
    message: str
    field: str | None = Field(default=None, description="The request field at fault, e.g. tasks[3].priority.")


class ScheduledTask(BaseModel):
    """The answer to a schedule request: the task's id, where it stands, and when it runs."""

    model_config = ConfigDict(frozen=True)

    id: str
    status: TaskStatus
    run_at: datetime
    key: str | None = None
    created: bool = Field(description="False when an earlier request with the same key made this task.")
    replaced: str | None = Field(
        default=None,
        description="The task this one replaced as its singleton flow key's holder (on_conflict=replace): "
        "cancelled in the same write.",
    )
    debounced: bool = Field(
        default=False,
        description="Merged into its debounced flow key's waiting task (this id), which runs once with the last "
        "payload of the burst: no task was created for this request.",
    )


class BatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tasks: list[ScheduleRequest] = Field(min_length=1, max_length=MAX_BATCH)
    dry_run: JsonBool = Field(
        default=False,
        description="Check every task as the write would, and write nothing: 200 with no results, or the error "
        "the write would answer. The SDK checks each batch of a longer list so, before writing the first.",
    )


class BatchItem(BaseModel):
    """One task's outcome in a batch: status is the HTTP status it would have had alone."""

    index: int
    status: int = Field(description="201 created, 200 existing, 409 key reused, 429/503 not written: retry it.")
    task: ScheduledTask | None = None
    error: ErrorBody | None = None

    @property
    def retriable(self) -> bool:
        return self.status in (429, 503)


class BatchResult(BaseModel):
    results: list[BatchItem]


class GateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    action: GateAction
    until: Moment | None = Field(default=None, description="RFC 3339; the gate lifts itself then.")
    reason: str = Field(default="", max_length=500)

    @field_validator("until")
    @classmethod
    def _until_is_plausible(cls, until: datetime | None) -> datetime | None:
        if until is not None and until - utcnow() > MAX_SCHEDULE_AHEAD:
            raise ValueError("more than a year ahead")  # the answer names the field: "until: more ..."
        return until

    @field_validator("reason", mode="before")
    @classmethod
    def _no_reason_is_empty(cls, reason: object) -> object:
        return "" if reason is None else reason  # null reads as no reason, as a null `until` reads as no end


class GateList(BaseModel):
    gates: list[Gate]


# Ids are uuid hex (atf_core.tasks.task_id_for).
TASK_ID_PATTERN = r"^[0-9a-f]{32}$"


# -- dead letters -------------------------------------------------------------------


ERROR_TYPE_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.]{0,199}$"


def dead_letter_filter(
    lambda_name: str,
    collection: str | None = None,
    error_type: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = MAX_DEAD_LETTER_LIST,
) -> DeadLetterFilter:
    """The core's filter, once the window makes sense."""
    if since is not None and until is not None and since > until:
        raise InputError("until is before since", "until")
    return DeadLetterFilter(lambda_name, collection, error_type, since, until, limit)


class DeadLetterSelection(BaseModel):
    """Which of a lambda's dead letters a discard acts on (all of them, up to limit, without filters)."""

    model_config = ConfigDict(extra="forbid")

    collection: str | None = Field(default=None, pattern=COLLECTION_PATTERN)
    error_type: str | None = Field(default=None, pattern=ERROR_TYPE_PATTERN, description="An exception class name.")
    since: Moment | None = Field(default=None, description="Died at or after (RFC 3339).")
    until: Moment | None = Field(default=None, description="Died at or before (RFC 3339).")
    limit: JsonInt = Field(default=MAX_DEAD_LETTER_ACTION, ge=1, le=MAX_DEAD_LETTER_ACTION, description="Oldest first.")
    dry_run: JsonBool = Field(default=False, description="Say how many and which, and change nothing.")
    after: str | None = Field(
        default=None,
        pattern=POSITION_PATTERN,
        description="Go on past the letters an earlier call reached: its `next` (those it left dead are skipped).",
    )
    ids: list[Annotated[str, Field(pattern=TASK_ID_PATTERN)]] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_CHOSEN_DEAD_LETTERS,
        description="These dead letters, by id: a selection of its own, with no other filter and no `after`. An id "
        "that is not a dead letter of the lambda is refused (404 naming `ids[i]`), and nothing is changed.",
    )

    @field_validator("ids")
    @classmethod
    def _a_selection_of_their_own(cls, ids: list[str] | None, info: ValidationInfo) -> list[str] | None:
        if ids is None:
            return None
        given = [name for name in ("collection", "error_type", "since", "until", "after") if info.data.get(name)]
        if given:
            raise ValueError(f"a selection of its own: give no {', '.join(given)} with ids")
        repeated = next((n for n, task_id in enumerate(ids) if task_id in ids[:n]), None)
        if repeated is not None:
            raise ValueError(f"ids[{repeated}] is ids[{ids.index(ids[repeated])}] again")
        limit = info.data.get("limit", MAX_DEAD_LETTER_ACTION)
        if len(ids) > limit:  # not the oldest `limit` of them, taken silently
            raise ValueError(f"{len(ids)} ids, more than limit {limit}: give the ones to act on")
        return ids

    @field_validator("until")
    @classmethod
    def _after_since(cls, until: datetime | None, info: ValidationInfo) -> datetime | None:
        since = info.data.get("since")
        if until is not None and since is not None and since > until:
            raise ValueError("until is before since")
        return until

    def filter(self, lambda_name: str) -> DeadLetterFilter:
        chosen = dead_letter_filter(lambda_name, self.collection, self.error_type, self.since, self.until, self.limit)
        return replace(chosen, ids=tuple(self.ids)) if self.ids else chosen

    def position(self) -> Position | None:
        return position_of(self.after) if self.after is not None else None


class RedriveRequest(DeadLetterSelection):
    """A selection to send back to new, with a fresh attempt budget, at most per_second a second."""

    per_second: JsonNumber | None = Field(
        default=None, gt=0, le=10_000, description="Drip rate: the n-th task runs n / per_second seconds from now."
    )
    budget: JsonInt | None = Field(
        default=None, ge=1, le=100, description="Attempts each gets on top of those used (default: the lambda's)."
    )


class DeadLetterList(BaseModel):
    """A page of dead letters, oldest first: up to its limit."""

    dead_letters: list[DeadLetter] = Field(description="Oldest first.")
    next: str | None = Field(
        default=None, description="Where this page ended, if more follow: pass it as `after`; null at the end."
    )

    @classmethod
    def of(cls, page: DeadLetterPage) -> DeadLetterList:
        return cls(dead_letters=page.letters, next=page_next(page))


# -- schedules and chains -----------------------------------------------------------


class ScheduleList(BaseModel):
    """A page of schedules, by name: up to its limit, and as many as a Lambda response holds."""

    schedules: list[Schedule]
    next: str | None = Field(
        default=None, description="The last name on this page where more follow: pass it as `after`; null at the end."
    )


class ScheduleView(Schedule):
    """A schedule with its next occurrences (none while paused)."""

    upcoming: list[datetime] = Field(default_factory=list)


class LinkRetry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    budget: JsonInt | None = Field(
        default=None, ge=1, le=100, description="Attempts on top of those used (default: the lambda's)."
    )


# -- changing waiting tasks ---------------------------------------------------------


def _when(run_at: datetime | None, delay_seconds: float | None, now: datetime) -> datetime | None:
    """A run time given as a moment or as a delay from now (not both)."""
    if run_at is not None and delay_seconds is not None:
        raise InputError("give run_at or delay_seconds, not both", "delay_seconds")
    return run_at if delay_seconds is None else now + timedelta(seconds=delay_seconds)


DELAY = Field(default=None, ge=0, le=MAX_SCHEDULE_AHEAD.total_seconds(), description="Seconds from now.")


class TaskAmendmentRequest(BaseModel):
    """What to change of one task not yet claimed; what is left out stays as it is."""

    model_config = ConfigDict(extra="forbid")

    run_at: Moment | None = Field(default=None, description="The new run time (RFC 3339).")
    delay_seconds: JsonNumber | None = DELAY
    priority: str | None = Field(default=None, pattern=NAME_PATTERN, description="One of the lambda's priorities.")
    payload: Payload | None = Field(default=None, description="Replaces the payload whole.")

    @field_validator("run_at", "delay_seconds", "priority", "payload", mode="before")
    @classmethod
    def _not_null(cls, value: object, info: ValidationInfo) -> object:
        # A null would read as "leave it", yet a caller sending "payload": null or "priority": null more
        # likely means "clear it" or "back to the default": neither exists, so it is refused, not ignored.
        if value is None:
            raise PydanticCustomError(
                "null_change", "null changes nothing: leave {field} out to keep it as it is", {"field": info.field_name}
            )
        return value

    def amendment(self, now: datetime) -> Amendment:
        when_field = "run_at" if self.delay_seconds is None else "delay_seconds"
        amendment = Amendment(_when(self.run_at, self.delay_seconds, now), self.priority, self.payload, when_field)
        if amendment.empty:
            raise InputError("the body changes nothing: give run_at or delay_seconds, priority or payload", "body")
        return amendment


class TaskSelection(BaseModel):
    """Which waiting tasks a bulk action touches: those matching every filter given, soonest first."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    lambda_: str | None = Field(default=None, alias="lambda", pattern=NAME_PATTERN)
    collection: str | None = Field(default=None, pattern=COLLECTION_PATTERN)
    flow_key: str | None = Field(default=None, pattern=FLOW_KEY_PATTERN, description="Only the tasks of this flow key.")
    status: list[TaskStatus] | None = Field(
        default=None, min_length=1, description="Any of new, enqueued, retriable_failure (default: all three)."
    )
    since: Moment | None = Field(default=None, description="Runs next at or after (RFC 3339).")
    until: Moment | None = Field(default=None, description="Runs next at or before (RFC 3339).")
    all: JsonBool = Field(default=False, description="Needed when no filter is given: every waiting task.")
    limit: JsonInt = Field(default=MAX_BULK, ge=1, le=MAX_BULK, description="The soonest N.")
    dry_run: JsonBool = Field(default=False, description="List what would be touched, and change nothing.")
    per_second: JsonNumber | None = Field(default=None, gt=0, le=10_000, description="The real run's rate.")
    cursor: str | None = Field(
        default=None,
        max_length=MAX_CURSOR,
        description="Go on where an earlier call of the same action and selection answered more: its cursor.",
    )

    def filter(self) -> TaskFilter:
        statuses = None if self.status is None else frozenset(self.status)
        return task_filter(
            self.lambda_, self.collection, statuses, self.since, self.until, self.all, self.limit, self.flow_key
        )


class BulkRescheduleRequest(TaskSelection):
    """A selection to run at a new time; with per_second, the n-th n / per_second seconds after it."""

    run_at: Moment | None = Field(default=None, description="The new run time (RFC 3339).")
    delay_seconds: JsonNumber | None = DELAY

    def when(self, now: datetime) -> datetime:
        run_at = _when(self.run_at, self.delay_seconds, now)
        if run_at is None:
            raise InputError("give run_at or delay_seconds: when the tasks should run", "run_at")
        return run_at


class BulkReprioritiseRequest(TaskSelection):
    """A selection to move to another priority's queue; with per_second, the n-th no sooner than n / per_second
    seconds from now."""

    priority: str = Field(pattern=NAME_PATTERN, description="One of the selected lambdas' priorities.")
