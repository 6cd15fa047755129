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
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from atf_core.schema import (
    FLOW_KEY_PATTERN,
    NAME_PATTERN,
    JsonInt,
    JsonNumber,
    Payload,
    TaskCollection,
    TimeoutSeconds,
    encode_payload,
    read_back,
    refusal,
)
from atf_core.vocabulary import CatchUp, Overlap

# Files of a zoneinfo directory that ZoneInfo opens but that are not IANA zones: the host's own zone (which
# would make a schedule's time depend on where the consumer runs), the POSIX rules, tzdata's "Factory", and
# the trees of variants.
NOT_ZONES = frozenset({"localtime", "posixrules", "Factory"})
NOT_ZONE_TREES = ("posix/", "right/")
SCHEDULE_NAME_PATTERN = r"^[A-Za-z0-9_.-]{1,80}$"
MISSED_AFTER = timedelta(seconds=60)  # an occurrence later than this is "missed", not just late
# A cron's occurrences before the ones a gap may run are counted one by one (~25 us each), so a long gap in a
# frequent expression counts this many at most: its skipped count is then a lower bound.
COUNTED_AT_MOST = 10_000
RANDOM_FIELD = re.compile(r"[Rr](\(.*\))?")  # croniter's R and R(a-b), not Vixie cron's
# The shortcuts croniter takes, as the five fields they stand for: a spec holds fields, which the daylight saving
# rule (ScheduleSpec._repeated) reads.
CRON_SHORTCUTS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


@dataclass(frozen=True)
class Occurrences:
    """The occurrences in a span: how many, and the latest of them, oldest first."""

    count: int
    latest: list[datetime]


class ScheduleSpec(BaseModel):
    """What a client asks for: which task to create, and when."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    lambda_: str = Field(alias="lambda", pattern=NAME_PATTERN)
    payload: Payload = Field(default_factory=dict)
    collection: TaskCollection = "default"
    priority: str | None = None
    max_attempts: JsonInt | None = Field(default=None, ge=1, le=100)
    timeout_seconds: TimeoutSeconds | None = None
    flow_key: str | None = Field(
        default=None,
        pattern=FLOW_KEY_PATTERN,
        description="The flow-control key of each task it creates (its lambda's key_limits apply); where they set "
        "singleton, an occurrence while another task holds the key is skipped.",
    )
    cron: str | None = Field(
        default=None,
        description="Cron expression: five fields, e.g. '*/5 * * * *', or six with the seconds last ('*/5 * * * * 30' "
        "is second 30 of every fifth minute); or @hourly, @daily, @weekly, @monthly, @yearly.",
    )
    every_seconds: JsonNumber | None = Field(default=None, ge=1, le=366 * 86400)
    timezone: str = "UTC"
    overlap: Overlap = Overlap.SKIP
    catch_up: CatchUp = CatchUp.ONCE
    catch_up_limit: JsonInt = Field(default=10, ge=1, le=1000)

    @field_validator("cron")
    @classmethod
    def _cron_parses(cls, cron: str | None, info: ValidationInfo) -> str | None:
        if cron is None:
            return None
        cron = CRON_SHORTCUTS.get(cron.strip().lower(), cron)
        if not croniter.is_valid(cron):
            raise ValueError(f"{cron!r} is not a valid cron expression")
        random = any(RANDOM_FIELD.fullmatch(part) for field in cron.split() for part in field.split(","))
        if random and not read_back(info):  # one stored before this check still reads
            # croniter draws such a field anew each time it is read: the occurrences shown, the ones fired and
            # their task ids would all differ.
            raise ValueError(f"{cron!r} has a random field (R): name the minute, hour or day it runs at")
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
        if zone in NOT_ZONES or zone.startswith(NOT_ZONE_TREES):
            raise ValueError(f"{zone!r} is not an IANA time zone (it is the host's, or a variant); name one")
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

    @model_validator(mode="after")
    def _zone_with_cron(self, info: ValidationInfo) -> ScheduleSpec:
        # A rate runs every so many seconds in any zone: one named with it would be stored and shown, meaning
        # nothing. A schedule stored before this check still reads.
        if self.every_seconds is not None and self.timezone != "UTC" and not read_back(info):
            raise refusal("timezone applies to a cron schedule; every_seconds runs at its rate in any zone", "timezone")
        return self

    def due(self, after: datetime, up_to: datetime, anchor: datetime) -> Occurrences:
        """The occurrences in (after, up_to]: how many, and the latest of them, as many as the catch-up policy
        may run. The latest are found from up_to backwards, so a gap of any length costs the same to fire."""
        keep = self.catch_up_limit if self.catch_up is CatchUp.ALL else 1
        if self.every_seconds is not None:
            return self._due_at_rate(self.every_seconds, after, up_to, anchor, keep)
        return self._due_by_cron(after, up_to, anchor, keep)

    @staticmethod
    def _due_at_rate(period: float, after: datetime, up_to: datetime, anchor: datetime, keep: int) -> Occurrences:
        def at(step: int) -> datetime:
            return anchor + timedelta(seconds=step * period)

        first = _steps_before(after, anchor, period) + 1
        last = _steps_before(up_to, anchor, period)
        while at(last + 1) <= up_to:  # the float division may land one step short of an exact boundary
            last += 1
        while last >= first and at(last) > up_to:
            last -= 1
        kept = range(max(first, last - keep + 1), last + 1)
        return Occurrences(max(0, last - first + 1), [at(step) for step in kept])

    def _due_by_cron(self, after: datetime, up_to: datetime, anchor: datetime, keep: int) -> Occurrences:
        # The latest are those walked forwards from a point a few occurrences back: croniter's steps backwards
        # find that point, but step differently from its forward ones in an hour daylight saving skips.
        start, latest = up_to, list[datetime]()
        while len(latest) < keep and start > after:
            start = self._back(start, after, keep + 1)
            latest = self._walk(start, up_to, anchor)
        earlier = self._walk(after, start, anchor, COUNTED_AT_MOST)  # only counted: a cron has no arithmetic
        return Occurrences(len(earlier) + len(latest), latest[-keep:])

    def _back(self, moment: datetime, after: datetime, steps: int) -> datetime:
        """The occurrence `steps` before the moment, or `after` if that comes first."""
        assert self.cron is not None
        backwards = croniter(self.cron, moment.astimezone(ZoneInfo(self.timezone)))
        for _ in range(steps):
            earlier = backwards.get_prev(datetime).astimezone(UTC)  # compared as instants (see next_after)
            if earlier <= after or earlier >= moment:  # the latter: a croniter that cannot step back from here
                return after
            moment = earlier
        return moment

    def _walk(self, after: datetime, up_to: datetime, anchor: datetime, most: int | None = None) -> list[datetime]:
        """The occurrences in (after, up_to], oldest first; the first `most` of them if given."""
        found: list[datetime] = []
        while most is None or len(found) < most:
            after = self.next_after(after, anchor)
            if after > up_to:
                break
            found.append(after)
        return found

    def next_after(self, moment: datetime, anchor: datetime) -> datetime:
        if (period := self.every_seconds) is not None:
            return anchor + timedelta(seconds=(_steps_before(moment, anchor, period) + 1) * period)
        zone = ZoneInfo(self.timezone)
        steps = croniter(self.cron, moment.astimezone(zone))
        following: datetime = steps.get_next(datetime)
        while self._repeated(following, zone):
            following = steps.get_next(datetime)
        # In UTC: Python compares two times of one zone by their wall clocks, fold ignored, and an occurrence
        # in the hour the clocks go back over would compare as before the same wall time's first pass.
        return following.astimezone(UTC)

    def _repeated(self, moment: datetime, zone: ZoneInfo) -> bool:
        """Whether this is the second pass of a wall-clock time the clocks went back over, for an expression at a
        fixed time of day: that runs once, at the first, as cron does. One with a wildcard in its minute or hour
        keeps its cadence through the repeated hour instead."""
        assert self.cron is not None
        minute, hour = self.cron.split()[:2]
        if minute.startswith("*") or hour.startswith("*"):
            return False
        local = moment.astimezone(UTC).astimezone(zone)
        return local.fold == 1 and local.replace(fold=0).utcoffset() != local.utcoffset()

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
    next_occurrence: datetime | None = None  # None while paused: resuming works it out from then
    last_task_id: str | None = None
    fired: int = 0
    skipped: int = 0
    version: int = 0

    def next_occurrences(self, now: datetime, count: int) -> list[datetime]:
        """Its next `count` occurrences after now; none while paused (it fires nothing)."""
        return [] if self.paused else self.spec.upcoming(now, self.created_at, count)

    def spec_json(self) -> str:
        # as UTF-8, as a payload is measured: \u escapes would make a 256 KiB payload 768 KB, over an item's 400 KB
        return encode_payload(self.spec.model_dump(mode="json", by_alias=True))


def _steps_before(moment: datetime, anchor: datetime, period: float) -> int:
    """The number of whole periods from the anchor to the moment, at least 0: a rate's k-th occurrence is
    anchor + k periods, k >= 1."""
    return max(math.floor((moment - anchor).total_seconds() / period), 0)


def choose(spec: ScheduleSpec, occurrences: list[datetime], now: datetime) -> list[datetime]:
    """Which of the due occurrences get a task, by the catch-up policy."""
    if not occurrences:
        return []
    if spec.catch_up is CatchUp.ALL:
        return occurrences[-spec.catch_up_limit :]
    if spec.catch_up is CatchUp.ONCE:
        return occurrences[-1:]
    return [o for o in occurrences if now - o <= MISSED_AFTER][-1:]
