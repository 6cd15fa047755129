"""When a periodic schedule recurs: its spec (a cron expression or a fixed rate, in a time zone, creating
one task per occurrence), the stored Schedule, and the occurrences that are due.

Each occurrence's task has a deterministic idempotency key (schedule name +
occurrence time), so two consumers firing the same schedule at once create
exactly one task. After downtime, the catch-up policy decides what runs:
`skip` the missed occurrences, run `once` for all of them, or run `all` (up
to catch_up_limit). The overlap policy `skip` leaves an occurrence out while
the previous occurrence's task has not finished.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from atf_core.schema import (
    COLLECTION_PATTERN,
    FLOW_KEY_PATTERN,
    NAME_PATTERN,
    JsonInt,
    JsonNumber,
    Payload,
    TimeoutSeconds,
    encode_payload,
    refusal,
)
from atf_core.vocabulary import CatchUp, Overlap

SCHEDULE_NAME_PATTERN = r"^[A-Za-z0-9_.-]{1,80}$"
MISSED_AFTER = timedelta(seconds=60)  # an occurrence later than this is "missed", not just late


class ScheduleSpec(BaseModel):
    """What a client asks for: which task to create, and when."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    lambda_: str = Field(alias="lambda", pattern=NAME_PATTERN)
    payload: Payload = Field(default_factory=dict)
    collection: str = Field(default="default", pattern=COLLECTION_PATTERN)
    priority: str | None = None
    max_attempts: JsonInt | None = Field(default=None, ge=1, le=100)
    timeout_seconds: TimeoutSeconds | None = None
    flow_key: str | None = Field(
        default=None,
        pattern=FLOW_KEY_PATTERN,
        description="The flow-control key of each task it creates (its lambda's key_limits apply); where they set "
        "singleton, an occurrence while another task holds the key is skipped.",
    )
    cron: str | None = Field(default=None, description="Five-field cron expression, e.g. '*/5 * * * *'.")
    every_seconds: JsonNumber | None = Field(default=None, ge=1, le=366 * 86400)
    timezone: str = "UTC"
    overlap: Overlap = Overlap.SKIP
    catch_up: CatchUp = CatchUp.ONCE
    catch_up_limit: JsonInt = Field(default=10, ge=1, le=1000)

    @field_validator("cron")
    @classmethod
    def _cron_parses(cls, cron: str | None) -> str | None:
        if cron is None:
            return None
        if not croniter.is_valid(cron):
            raise ValueError(f"{cron!r} is not a valid cron expression")
        # A year field can run out of occurrences, and a date that never comes
        # (30 February) has none: either would fail each time the schedule fires.
        if len(cron.split()) > 6:
            raise ValueError(f"{cron!r} has a year field; give five fields (or six, with seconds)")
        try:
            croniter(cron, datetime(2000, 1, 1, tzinfo=UTC)).get_next(datetime)
        except CroniterError:
            raise ValueError(f"{cron!r} never occurs") from None
        return cron

    @field_validator("timezone")
    @classmethod
    def _zone_exists(cls, zone: str) -> str:
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {zone!r}") from None
        return zone

    @model_validator(mode="after")
    def _one_cadence(self) -> ScheduleSpec:
        if self.cron is None and self.every_seconds is None:
            raise refusal("give exactly one of cron or every_seconds", "cron")
        if self.cron is not None and self.every_seconds is not None:
            raise refusal("give exactly one of cron or every_seconds", "every_seconds")
        return self

    def occurrences(self, after: datetime, up_to: datetime, anchor: datetime) -> list[datetime]:
        """Occurrences in (after, up_to], oldest first (at most 10,000)."""
        found: list[datetime] = []
        current = after
        while len(found) < 10_000:
            current = self.next_after(current, anchor)
            if current > up_to:
                return found
            found.append(current)
        return found

    def next_after(self, moment: datetime, anchor: datetime) -> datetime:
        if self.every_seconds is not None:
            period = self.every_seconds
            steps = math.floor((moment - anchor).total_seconds() / period) + 1
            return anchor + timedelta(seconds=max(steps, 1) * period)
        zone = ZoneInfo(self.timezone)
        following: datetime = croniter(self.cron, moment.astimezone(zone)).get_next(datetime)
        return following

    def upcoming(self, now: datetime, anchor: datetime, count: int) -> list[datetime]:
        moments, current = [], now
        for _ in range(count):
            current = self.next_after(current, anchor)
            moments.append(current)
        return moments


class Schedule(BaseModel):
    """A stored schedule: its spec and where it stands."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(pattern=SCHEDULE_NAME_PATTERN)
    spec: ScheduleSpec
    paused: bool = False
    created_at: datetime
    last_occurrence: datetime | None = None
    next_occurrence: datetime | None = None
    last_task_id: str | None = None
    fired: int = 0
    skipped: int = 0
    version: int = 0

    def spec_json(self) -> str:
        # as UTF-8, as a payload is measured: \u escapes would make a 256 KiB payload 768 KB, over an item's 400 KB
        return encode_payload(self.spec.model_dump(mode="json", by_alias=True))


def choose(spec: ScheduleSpec, occurrences: list[datetime], now: datetime) -> list[datetime]:
    """Which of the due occurrences get a task, by the catch-up policy."""
    if not occurrences:
        return []
    if spec.catch_up is CatchUp.ALL:
        return occurrences[-spec.catch_up_limit :]
    if spec.catch_up is CatchUp.ONCE:
        return occurrences[-1:]
    return [o for o in occurrences if now - o <= MISSED_AFTER][-1:]
