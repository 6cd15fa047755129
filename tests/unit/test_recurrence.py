"""When a schedule recurs: the occurrences a gap holds (counted, and the latest found from its end), and
cron expressions across daylight saving, as cron runs them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from pydantic import ValidationError

from atf_core.recurrence import COUNTED_AT_MOST, Schedule, ScheduleSpec
from atf_core.schema import STORED
from atf_core.store.items import schedule_fields, schedule_from

ANCHOR = datetime(2027, 1, 1, tzinfo=UTC)
PARIS = ZoneInfo("Europe/Paris")


def spec(**fields: Any) -> ScheduleSpec:
    return ScheduleSpec.model_validate({"lambda": "tick", **fields})


def walked(schedule: ScheduleSpec, after: datetime, up_to: datetime) -> list[datetime]:
    """Every occurrence in (after, up_to], one next_after at a time: what firing each poll would have seen."""
    found, current = [], after
    while (current := schedule.next_after(current, ANCHOR)) <= up_to:
        found.append(current)
    return found


def test_a_rate_paused_for_days_counts_every_missed_occurrence_and_keeps_the_latest() -> None:
    # Given every 5 s, last fired three days before now
    schedule = spec(every_seconds=5, catch_up="once")
    after, up_to = ANCHOR, ANCHOR + timedelta(days=3, seconds=2)
    # When the gap is looked at
    due = schedule.due(after, up_to, ANCHOR)
    # Then it holds 51,840 occurrences, and the one kept is the latest, not the oldest
    assert due.count == 3 * 86400 // 5
    assert due.latest == [ANCHOR + timedelta(days=3)]


def test_a_cron_gap_longer_than_the_count_keeps_its_latest_occurrences() -> None:
    schedule = spec(cron="* * * * *", catch_up="all", catch_up_limit=3)
    up_to = ANCHOR + timedelta(days=30, seconds=30)
    due = schedule.due(ANCHOR, up_to, ANCHOR)
    assert due.latest == [ANCHOR + timedelta(days=30, minutes=-2 + i) for i in range(3)]
    assert due.count == COUNTED_AT_MOST + 3  # the lower bound the docs name: 43,200 were missed


@pytest.mark.parametrize(
    ("cron", "zone"),
    [
        ("30 2 * * *", "Europe/Paris"),
        ("*/30 * * * *", "Europe/Paris"),
        ("0 * * * *", "America/New_York"),
        ("15 1-3 * * 0", "America/New_York"),
        ("0 0 1 * *", "Europe/Paris"),
        ("30 2 * * * */20", "Europe/Paris"),
    ],
)
@pytest.mark.parametrize("catch_up_limit", [1, 2, 3, 7, 1000])
def test_the_latest_found_backwards_are_the_ones_walked_forwards(cron: str, zone: str, catch_up_limit: int) -> None:
    # Given a span that crosses both daylight-saving changes of 2027, in pieces that start and end anywhere
    schedule = spec(cron=cron, timezone=zone, catch_up="all", catch_up_limit=catch_up_limit)
    for after, up_to in (
        (datetime(2027, 3, 13, 23, 59, 59, 500000, tzinfo=UTC), datetime(2027, 3, 28, 4, tzinfo=UTC)),
        (datetime(2027, 10, 30, 12, tzinfo=UTC), datetime(2027, 11, 8, 1, 30, 0, 250000, tzinfo=UTC)),
        (datetime(2027, 10, 31, 0, 30, tzinfo=UTC), datetime(2027, 10, 31, 1, 30, tzinfo=UTC)),
        # the latest found backwards start inside the repeated hour, the earlier ones are counted up to there
        (datetime(2027, 10, 31, 0, 10, tzinfo=UTC), datetime(2027, 10, 31, 2, 9, tzinfo=UTC)),
    ):
        every = walked(schedule, after, up_to)
        # When the span is looked at as a gap
        due = schedule.due(after, up_to, ANCHOR)
        # Then it counts them all and keeps the latest of them
        assert (due.count, due.latest) == (len(every), every[-catch_up_limit:]), (after, up_to)


def test_a_fixed_time_of_day_runs_once_on_the_night_the_clocks_go_back() -> None:
    nightly = spec(cron="30 2 * * *", timezone="Europe/Paris")
    nights = nightly.upcoming(datetime(2027, 10, 29, 12, tzinfo=UTC), ANCHOR, 3)
    assert [moment.astimezone(PARIS).strftime("%d %H:%M %z") for moment in nights] == [
        "30 02:30 +0200",
        "31 02:30 +0200",  # the first 02:30 of the night; the second, an hour later, is not another occurrence
        "01 02:30 +0100",
    ]


def test_a_fixed_time_in_the_hour_skipped_in_spring_runs_at_its_end_once() -> None:
    nightly = spec(cron="30 2 * * *", timezone="Europe/Paris")
    nights = nightly.upcoming(datetime(2027, 3, 27, tzinfo=UTC), ANCHOR, 3)
    assert [moment.astimezone(PARIS).strftime("%d %H:%M") for moment in nights] == ["27 02:30", "28 03:00", "29 02:30"]


def test_a_cadence_with_a_wildcard_hour_keeps_running_through_the_repeated_hour() -> None:
    half_hourly = spec(cron="*/30 * * * *", timezone="Europe/Paris")
    start = datetime(2027, 10, 30, 23, 45, tzinfo=UTC)  # 01:45 in Paris, summer time
    moments = half_hourly.upcoming(start, ANCHOR, 5)
    assert [moment - start for moment in moments] == [timedelta(minutes=15 + 30 * i) for i in range(5)]


@pytest.mark.parametrize("zone", ["localtime", "posixrules", "Factory", "posix/Europe/Paris", "right/UTC"])
def test_a_zone_file_that_is_not_an_iana_zone_is_refused(zone: str) -> None:
    with pytest.raises(ValueError, match="is not an IANA time zone"):
        spec(cron="0 3 * * *", timezone=zone)


def test_iana_zones_are_taken() -> None:
    assert [spec(cron="0 3 * * *", timezone=zone).timezone for zone in ("UTC", "Europe/Paris", "EST5EDT")] == [
        "UTC",
        "Europe/Paris",
        "EST5EDT",
    ]


def test_a_zone_is_refused_beside_every_seconds_naming_it() -> None:
    """A rate runs every so many seconds in any zone: the zone would be stored and shown, and mean nothing."""
    with pytest.raises(ValidationError) as caught:
        spec(every_seconds=60, timezone="Europe/Paris")
    assert "timezone applies to a cron schedule" in str(caught.value)
    assert spec(every_seconds=60, timezone="UTC").every_seconds == 60
    stored = ScheduleSpec.model_validate(
        {"lambda": "work", "every_seconds": 60, "timezone": "Europe/Paris"}, context=STORED
    )
    assert stored.timezone == "Europe/Paris"  # one stored before the check still reads


@pytest.mark.parametrize(
    ("shortcut", "fields"),
    [("@hourly", "0 * * * *"), ("@daily", "0 0 * * *"), ("@Midnight", "0 0 * * *"), ("@weekly", "0 0 * * 0"),
     ("@monthly", "0 0 1 * *"), ("@yearly", "0 0 1 1 *"), ("@annually", "0 0 1 1 *")],
)  # fmt: skip
def test_a_cron_shortcut_is_kept_as_its_five_fields_and_steps_like_them(shortcut: str, fields: str) -> None:
    # A shortcut had passed croniter's check and then failed each step (the daylight saving rule reads fields)
    schedule = spec(cron=shortcut, timezone="Europe/Paris")
    assert schedule.cron == fields
    start = datetime(2027, 10, 30, tzinfo=UTC)
    assert schedule.upcoming(start, ANCHOR, 3) == spec(cron=fields, timezone="Europe/Paris").upcoming(start, ANCHOR, 3)


@pytest.mark.parametrize("cron", ["@reboot", "@every 5m", "@"])
def test_what_croniter_does_not_take_is_refused(cron: str) -> None:
    with pytest.raises(ValueError, match="is not a valid cron expression"):
        spec(cron=cron)


def test_six_fields_put_the_seconds_last() -> None:
    every_fifth_minute_at_30s = spec(cron="*/5 * * * * 30")
    start = datetime(2027, 1, 1, tzinfo=UTC)
    assert every_fifth_minute_at_30s.upcoming(start, ANCHOR, 2) == [
        start + timedelta(seconds=30),
        start + timedelta(minutes=5, seconds=30),
    ]


def test_a_schedule_stored_paused_with_a_next_occurrence_reads_without_one() -> None:
    # Given a paused schedule as a version before this one stored it: its next occurrence kept
    spec = ScheduleSpec.model_validate({"lambda": "work", "every_seconds": 60})
    old = Schedule(name="s", spec=spec, paused=True, created_at=ANCHOR, next_occurrence=ANCHOR + timedelta(minutes=1))
    fields, _ = schedule_fields(old)
    assert "next" in fields
    # Then it reads back with none, and no occurrences to come, until it is resumed
    read = schedule_from(fields)
    assert read.paused and read.next_occurrence is None and read.next_occurrences(ANCHOR, 3) == []
