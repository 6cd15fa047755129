"""The console's busiest flow keys: counted from the tasks it read, and only keys with something to show."""

from __future__ import annotations

from datetime import timedelta

from atf_core.schema import Task, TaskStatus
from atf_local.console.data import ConsoleData, KeyRow
from tests.builders import NOW, a_task


def _task(flow_key: str | None, status: TaskStatus, finished_ago: timedelta | None = None) -> Task:
    return a_task(
        NOW - timedelta(minutes=5),
        id=f"{flow_key}-{status}-{finished_ago}",
        status=status,
        attempt=1,
        flow_key=flow_key,
        finished_at=None if finished_ago is None else NOW - finished_ago,
    )


def test_keys_are_ranked_by_waiting_and_running_tasks() -> None:
    # Given one key with a waiting and a running task, and another with one waiting and one just finished
    tasks = [
        _task("busy", TaskStatus.NEW),
        _task("busy", TaskStatus.PROCESSING),
        _task("quiet", TaskStatus.ENQUEUED),
        _task("quiet", TaskStatus.SUCCESS, finished_ago=timedelta(seconds=10)),
        _task(None, TaskStatus.NEW),
    ]
    # When the console ranks them
    rows = ConsoleData.key_rows(tasks, NOW)
    # Then the busier key comes first, keyless tasks are not a key, and the finished task counts for a minute
    assert rows == [KeyRow("work", "busy", 1, 1, 0), KeyRow("work", "quiet", 1, 0, 1)]


def test_a_key_whose_tasks_all_ended_is_not_listed() -> None:
    # Given a key whose tasks were all cancelled a while ago, and one whose task finished over a minute ago
    tasks = [
        _task("gone", TaskStatus.CANCELLED, finished_ago=timedelta(minutes=3)),
        _task("gone", TaskStatus.CANCELLED),
        _task("old", TaskStatus.SUCCESS, finished_ago=timedelta(minutes=2)),
        _task("live", TaskStatus.NEW),
    ]
    # When the console ranks them, then only the key with something waiting, running or just finished is listed
    assert ConsoleData.key_rows(tasks, NOW) == [KeyRow("work", "live", 1, 0, 0)]
