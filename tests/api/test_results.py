"""A callback's return value, kept with its task: read by client.get, client.result (which waits for a
final state), AsyncAtfClient and `atf status`; one JSON cannot carry, or too large, fails the attempt."""

from __future__ import annotations

import asyncio
import json

import pytest

from atf_core.schema import MAX_RESULT_BYTES, TaskStatus
from atf_sdk.async_client import AsyncAtfClient
from atf_sdk.cli import main
from atf_sdk.operations import TaskFailed
from tests.api.live import LiveStack

RESULT = {"thumbnail": "s3://bucket/cat-small.png", "sizes": [64, 128], "ok": True, "ratio": 0.5}


def test_a_returned_value_is_kept_and_result_waits_for_it(live: LiveStack) -> None:
    task = live.client.schedule("flaky", {"returns": RESULT, "works_from": 2})
    assert live.client.result(task.id, wait=20) == RESULT  # after a failed first attempt
    done = live.client.get(task.id)
    assert (done.status, done.attempt, done.result) == (TaskStatus.SUCCESS, 2, RESULT)


def test_nothing_returned_is_no_result(live: LiveStack) -> None:
    task = live.client.schedule("flaky", {})
    assert live.client.result(task.id, wait=20) is None and live.client.get(task.id).result is None


def test_result_of_a_task_not_finished_times_out_and_of_a_failed_one_says_how_it_ended(live: LiveStack) -> None:
    later = live.client.schedule("flaky", {"returns": 1}, delay_seconds=600)
    with pytest.raises(TimeoutError, match="still new"):
        live.client.result(later.id, wait=0.5)
    failed = live.client.schedule("flaky", {"works_from": 9})  # two attempts, both fail: a dead letter
    with pytest.raises(TaskFailed, match="dead_letter: ValueError") as raised:
        live.client.result(failed.id, wait=20)
    assert raised.value.task.result is None


@pytest.mark.parametrize(
    ("payload", "error_type"),
    [({"bytes": MAX_RESULT_BYTES}, "ResultTooLarge"), ({"unkept": True}, "ResultNotJson")],
)
def test_a_result_json_cannot_keep_fails_the_attempt(
    live: LiveStack, payload: dict[str, object], error_type: str
) -> None:
    task = live.client.schedule("flaky", payload)
    with pytest.raises(TaskFailed):
        live.client.result(task.id, wait=20)
    done = live.client.get(task.id)
    assert done.status is TaskStatus.DEAD_LETTER and [e.type for e in done.errors] == [error_type] * 2
    assert done.result is None


def test_the_largest_result_is_kept_whole(live: LiveStack) -> None:
    task = live.client.schedule("flaky", {"bytes": MAX_RESULT_BYTES - 2})  # the JSON string's quotes count
    assert live.client.result(task.id, wait=20) == "x" * (MAX_RESULT_BYTES - 2)


def test_the_async_client_and_the_cli_show_the_result(live: LiveStack, capsys: pytest.CaptureFixture[str]) -> None:
    task = live.client.schedule("flaky", {"returns": RESULT})

    async def read() -> object:
        async with AsyncAtfClient(live.api_url, region="us-east-1") as atf:
            return await atf.result(task.id, wait=20)

    assert asyncio.run(read()) == RESULT
    with pytest.raises(SystemExit):
        main(["status", "--api-url", live.api_url, task.id, "--json"])
    assert json.loads(capsys.readouterr().out)[0]["result"] == RESULT
    with pytest.raises(SystemExit):
        main(["status", "--api-url", live.api_url, task.id])
    assert f"result: {json.dumps(RESULT, sort_keys=True)}" in capsys.readouterr().out  # as the payload carried it
