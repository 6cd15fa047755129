"""Singleton flow keys through the public surface: the API (one task and a batch), the sync and async SDK
clients and the CLI (--json). Lambda "single" of the package's stack sets key_limits.singleton."""

from __future__ import annotations

import json
import re
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from atf_core.aws import make_clients
from atf_core.errors import FlowKeyBusy, InputError
from atf_core.schema import ScheduleRequest, TaskStatus
from atf_core.store.base import CreateResult
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling
from atf_local.stack import LocalStack
from atf_sdk.async_client import AsyncAtfClient
from atf_sdk.cli import main
from atf_sdk.client import AtfClient
from tests.api import test_async_client, test_cli
from tests.api.states import kill

# fixtures of the CLI's and the async client's tests
atf, aclient, anyio_backend = test_cli.atf, test_async_client.aclient, test_async_client.anyio_backend


def fresh_key() -> str:
    return f"cust-{uuid.uuid4().hex[:12]}"


def test_the_api_refuses_a_held_key_409_naming_it_and_writes_nothing(raw: Any, item_count: Any) -> None:
    flow_key = fresh_key()
    body = {"lambda": "single", "flow_key": flow_key, "delay_seconds": 600}
    first = raw("POST", "/v1/lambdas/single/tasks", body)
    assert first.status == 201
    before = item_count()
    refused = raw("POST", "/v1/lambdas/single/tasks", {**body, "payload": {"n": 2}})
    assert (refused.status, refused.body["code"], refused.body["field"]) == (409, "flow_key_busy", "flow_key")
    assert flow_key in refused.body["message"] and first.body["id"] in refused.body["message"]
    assert item_count() == before


def test_the_api_replaces_a_waiting_holder_and_says_which(raw: Any, client: AtfClient) -> None:
    body = {"lambda": "single", "flow_key": fresh_key(), "delay_seconds": 600}
    first = raw("POST", "/v1/tasks", body)
    second = raw("POST", "/v1/tasks", {**body, "payload": {"n": 2}, "on_conflict": "replace"})
    assert second.status == 201 and second.body["replaced"] == first.body["id"]
    assert client.get(first.body["id"]).status is TaskStatus.CANCELLED
    assert client.get(second.body["id"]).payload == {"n": 2}


def test_on_conflict_where_no_singleton_is_refused_naming_it(raw: Any, item_count: Any) -> None:
    before = item_count()
    refused = raw("POST", "/v1/tasks", {"lambda": "work", "flow_key": "a", "on_conflict": "replace"})
    assert (refused.status, refused.body["field"]) == (400, "on_conflict")
    bad = raw("POST", "/v1/tasks", {"lambda": "single", "flow_key": "a", "on_conflict": "later"})
    assert (bad.status, bad.body["field"]) == (400, "on_conflict")
    assert item_count() == before


def test_a_batch_item_on_a_held_key_is_its_own_409(client: AtfClient) -> None:
    flow_key = fresh_key()
    item = {"lambda": "single", "flow_key": flow_key, "delay_seconds": 600}
    first, second = client.schedule_many([item, {**item, "payload": {"n": 2}, "key": f"{flow_key}-2"}])
    assert (first.status, second.status) == (201, 409)  # in the batch's order, as sent one by one
    assert second.error is not None and second.error.code == "flow_key_busy"
    replacing = client.schedule_many([{**item, "payload": {"n": 3}, "on_conflict": "replace"}])
    assert replacing[0].task is not None and replacing[0].task.replaced is not None


def test_the_sync_client_raises_flow_key_busy_and_replaces(client: AtfClient) -> None:
    flow_key = fresh_key()
    first = client.schedule("single", flow_key=flow_key, delay_seconds=600)
    with pytest.raises(FlowKeyBusy, match=first.id):
        client.schedule("single", flow_key=flow_key, delay_seconds=600)
    second = client.schedule("single", flow_key=flow_key, delay_seconds=600, on_conflict="replace")
    assert second.replaced == first.id
    with pytest.raises(InputError):
        client.schedule("single", delay_seconds=600, on_conflict="replace")  # no flow_key: refused before sending


@pytest.mark.anyio
async def test_the_async_client_raises_flow_key_busy_and_replaces(aclient: AsyncAtfClient) -> None:
    flow_key = fresh_key()
    first = await aclient.schedule("single", flow_key=flow_key, delay_seconds=600)
    with pytest.raises(FlowKeyBusy, match=first.id):
        await aclient.schedule("single", flow_key=flow_key, delay_seconds=600)
    second = await aclient.schedule("single", flow_key=flow_key, delay_seconds=600, on_conflict="replace")
    assert second.replaced == first.id


def test_the_cli_schedules_on_a_singleton_key(atf: Any, client: AtfClient) -> None:
    flow_key = fresh_key()
    code, out, _ = atf("schedule", "single", "--delay", "600", "--flow-key", flow_key, "-q")
    first = out.strip()
    assert code == 0
    code, _, err = atf("schedule", "single", "--delay", "600", "--flow-key", flow_key, "--json")
    assert code != 0 and json.loads(err)["code"] == "flow_key_busy" and first in json.loads(err)["message"]
    code, out, _ = atf(
        "schedule", "single", "--delay", "600", "--flow-key", flow_key, "--on-conflict", "replace", "--json"
    )
    assert code == 0 and json.loads(out)["replaced"] == first
    code, out, _ = atf("schedule", "single", "--delay", "600", "--flow-key", fresh_key(), "--on-conflict", "replace")
    assert code == 0 and "replaced" not in out


RACES = 8  # timing matters: the race runs this often
RACERS = 3


def race(stack: LocalStack, flow_key: str, mode: str) -> tuple[list[CreateResult], int]:
    """RACERS schedulers, each with its own client, schedule on one key at once: what each got, and refusals."""
    gate = threading.Barrier(RACERS)

    def one(n: int) -> CreateResult | None:
        scheduling = Scheduling(DynamoTaskStore(make_clients(stack.endpoint).dynamodb, stack.config), stack.config)
        request = ScheduleRequest.model_validate(
            {"lambda": "single", "flow_key": flow_key, "delay_seconds": 600, "payload": {"n": n}, "on_conflict": mode}
        )
        gate.wait()
        try:
            return scheduling.schedule(request)
        except FlowKeyBusy:
            return None

    with ThreadPoolExecutor(RACERS) as pool:
        results = list(pool.map(one, range(RACERS)))
    return [r for r in results if r is not None], results.count(None)


@pytest.mark.parametrize("mode", ["refuse", "replace"])
def test_schedulers_racing_on_one_key_leave_exactly_one_holder(
    stack: LocalStack, store: DynamoTaskStore, mode: str
) -> None:
    """On moto's server (its writes atomic, as DynamoDB's): the schedulers race for real."""
    for _ in range(RACES):
        flow_key = fresh_key()
        accepted, refused = race(stack, flow_key, mode)
        tasks = store.get_many([r.task.id for r in accepted])
        live = [t.id for t in tasks if not t.status.settled]
        assert len(live) == 1 and store.key_holder("single", flow_key) == live[0]
        if mode == "refuse":
            assert (len(accepted), refused) == (1, RACERS - 1)
        else:  # each accepted one replaced the one before it, or was refused finding it taken mid-race
            cancelled = {t.id for t in tasks if t.status is TaskStatus.CANCELLED}
            assert cancelled == {r.replaced for r in accepted if r.replaced}
            assert len(cancelled) == len(accepted) - 1


def test_a_redrive_leaves_a_dead_letter_whose_key_another_task_holds(
    client: AtfClient, store: DynamoTaskStore, stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the SDK and the CLI: redriving it would run two tasks of one singleton key at once."""
    flow_key = fresh_key()
    dead = kill(store, client.schedule("single", flow_key=flow_key).id, error_type="KeyBusyCase")
    successor = client.schedule("single", flow_key=flow_key, delay_seconds=600)  # a dead letter frees the key
    looked = client.redrive("single", error_type="KeyBusyCase", dry_run=True)  # a dry run says so beforehand
    assert (looked.dry_run, looked.changed, looked.key_busy) == (True, 0, [dead.id])
    done = client.redrive("single", error_type="KeyBusyCase")
    assert (done.changed, done.key_busy) == (0, [dead.id])
    assert client.get(dead.id).status is TaskStatus.DEAD_LETTER
    redrive = ["dead-letters", "redrive", "--api-url", stack.api_url, "single", "--error-type", "KeyBusyCase", "-y"]
    code, out = _cli([*redrive, "--dry-run"], capsys)
    assert code == 0 and "1 would stay dead" in out and dead.id in out
    code, out = _cli(redrive, capsys)
    assert code == 0 and "1 left dead" in out and dead.id in out
    client.cancel(successor.id)  # it settles: the key is free again
    code, out = _cli([*redrive, "--json"], capsys)
    assert code == 0 and (json.loads(out)["changed"], json.loads(out)["key_busy"]) == (1, [])
    assert client.get(dead.id).status is TaskStatus.NEW


def test_a_redrive_goes_on_past_the_letters_it_left_dead_from_its_next(
    client: AtfClient, store: DynamoTaskStore, stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the SDK and the CLI: without `after`, the held one is the oldest and comes back every time."""
    # Given a dead letter whose key another task holds, and a younger one whose key is free
    error_type, held, free = f"GoOn{uuid.uuid4().hex[:8]}", fresh_key(), fresh_key()
    stuck = kill(store, client.schedule("single", flow_key=held).id, error_type=error_type)
    client.schedule("single", flow_key=held, delay_seconds=600)
    younger = kill(store, client.schedule("single", flow_key=free).id, error_type=error_type)
    # When the oldest one alone is redriven, through the SDK and again through the CLI
    first = client.redrive("single", error_type=error_type, limit=1)
    assert (first.changed, first.key_busy, first.more) == (0, [stuck.id], True) and first.next
    redrive = ["dead-letters", "redrive", "--api-url", stack.api_url, "single", "--error-type", error_type, "-y"]
    code, out = _cli([*redrive, "--limit", "1"], capsys)
    way_on = re.search(rf"redrive with --after {first.next} --until (\S+) to go on past them", " ".join(out.split()))
    assert code == 0 and way_on, out
    # Then the CLI, going on as it says, redrives the younger one
    code, out = _cli([*redrive, "--limit", "1", "--after", first.next, "--until", way_on[1], "--json"], capsys)
    done = json.loads(out)
    assert code == 0 and ([d["id"] for d in done["matched"]], done["changed"], done["next"]) == ([younger.id], 1, None)
    assert client.get(younger.id).status is TaskStatus.NEW and client.get(stuck.id).status is TaskStatus.DEAD_LETTER


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    return int(exited.value.code or 0), capsys.readouterr().out
