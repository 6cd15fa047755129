"""The frontend API's wire models: what it accepts besides ScheduleRequest, and what it returns.

Defined once here because two sides read them: the frontend Lambda (which
only has this layer) and the SDK's client. Task and Gate records are the
schema's own models.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator

from atf_core.schema import MAX_SCHEDULE_AHEAD, Gate, GateAction, ScheduleRequest, TaskStatus, utcnow

MAX_BATCH = 100


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


class BatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tasks: list[ScheduleRequest] = Field(min_length=1, max_length=MAX_BATCH)


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
    until: datetime | None = Field(default=None, description="RFC 3339; the gate lifts itself then.")
    reason: str = Field(default="", max_length=500)

    @field_validator("until")
    @classmethod
    def _until_is_plausible(cls, until: datetime | None) -> datetime | None:
        if until is None:
            return None
        if until.tzinfo is None:
            raise ValueError("until needs a time zone offset (RFC 3339), e.g. 2026-01-01T00:00:00Z")
        try:
            ahead = until - utcnow()
        except OverflowError:
            raise ValueError("until is outside the representable range of times") from None
        if ahead > MAX_SCHEDULE_AHEAD:
            raise ValueError("until is more than a year ahead")
        return until


class GateList(BaseModel):
    gates: list[Gate]


# Ids are uuid hex (atf_core.scheduling.task_id_for).
TASK_ID_PATTERN = r"^[0-9a-f]{32}$"
