"""AsyncAtfClient against the local stack: the same methods as AtfClient, the same answers, the same
errors raised for bad input before anything is sent, the same retries, concurrency in one event loop."""

from __future__ import annotations

import asyncio
import inspect
import json
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from atf_core.errors import (
    AtfError,
    Conflict,
    MissingAuthentication,
    NotFound,
    Throttled,
    Unavailable,
    UnknownLambda,
    WrongType,
)
from atf_core.schema import TaskStatus
from atf_local.stack import LocalStack, free_port
from atf_sdk.async_client import AsyncAtfClient
from atf_sdk.client import API_URL_ENV, AtfClient, RetryPolicy
from functions.frontend.handler import lambda_handler
from tests.api import test_client
from tests.api.live import LiveStack
from tests.api.states import kill
from tests.api.test_client import FAST, Event, _reply
from tests.api.test_sdk_input import NOT_OBJECTS, SAME_AS_THE_API, SDK_SURFACES

serve = test_client.serve  # the stand-in servers of the sync client's tests, a fixture

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # what FastAPI and aiohttp run on


@pytest.fixture
async def aclient(stack: LocalStack) -> Any:
    async with AsyncAtfClient(stack.api_url, region="us-east-1", retry=RetryPolicy(attempts=3, base_s=0.05)) as atf:
        yield atf


@pytest.fixture
def counted(serve: Any) -> Iterator[tuple[str, list[Event]]]:
    """The real frontend behind a stand-in that counts the requests reaching it."""
    seen: list[Event] = []
    yield serve(scripted(["real"], seen)), seen


def _methods(client: object) -> dict[str, Any]:
    public = {name: getattr(client, name) for name in dir(client) if not name.startswith("_")}
    return {name: value for name, value in public.items() if callable(value)}


def test_the_async_client_has_every_method_of_the_sync_one_with_the_same_signature() -> None:
    sync = _methods(AtfClient("http://127.0.0.1:9", region="us-east-1"))
    not_sync = _methods(AsyncAtfClient("http://127.0.0.1:9", region="us-east-1"))
    assert set(sync) - {"close"} == set(not_sync) - {"aclose"}
    calls = [name for name in sync if name not in ("close", "from_env")]
    assert len(calls) == 31  # with result(), issue 17 §2; change() and bulk_*(), issue 16 §3; dead_letter_page()
    for name in calls:
        assert inspect.iscoroutinefunction(not_sync[name]) and not inspect.iscoroutinefunction(sync[name]), name
        assert inspect.signature(sync[name]) == inspect.signature(not_sync[name]), name
        assert sync[name].__doc__ == not_sync[name].__doc__ and sync[name].__name__ == name
    assert (
        str(inspect.signature(sync["get"]))
        == "(task_id: str, *, lambda_name: str | None = None) -> atf_core.schema.Task"
    )
    assert sync["get"].__doc__ and "as it stands now" in sync["get"].__doc__
    assert inspect.signature(AtfClient.get).parameters.keys() == {"self", "task_id", "lambda_name"}


async def test_tasks_gates_and_stats_through_the_async_client(aclient: AsyncAtfClient, client: AtfClient) -> None:
    scheduled = await aclient.schedule("work", {"to": "ann"}, collection="async", priority="high", delay_seconds=600)
    task = await aclient.get(scheduled.id)
    assert scheduled.created and task == client.get(scheduled.id) == AtfClient.get(client, scheduled.id)
    assert task == await AsyncAtfClient.get(aclient, scheduled.id)  # called on the class, as methods can be
    assert (task.lambda_, task.payload, task.priority, task.status) == ("work", {"to": "ann"}, "high", TaskStatus.NEW)
    assert (await aclient.cancel(task.id)).status is TaskStatus.CANCELLED
    gate = await aclient.pause("report", "async", reason="maintenance")
    assert (gate.lambda_, gate.collection, gate.reason) == ("report", "async", "maintenance")
    scope = ("report", "async", "maintenance")
    assert scope in [(g.lambda_, g.collection, g.reason) for g in await aclient.gates()]
    assert (await aclient.gates()) == client.gates()
    await aclient.resume("report", "async")
    assert scope not in [(g.lambda_, g.collection, g.reason) for g in client.gates()]
    moving = {"as_of", "start_lag", "oldest_due"}
    assert (await aclient.stats("work")).model_dump(exclude=moving) == client.stats("work").model_dump(exclude=moving)
    assert (await aclient.openapi())["paths"] == client.openapi()["paths"]


async def test_a_batch_of_more_than_a_hundred_in_order(aclient: AsyncAtfClient, client: AtfClient) -> None:
    progress: list[int] = []
    results = await aclient.schedule_many(
        ({"lambda": "work", "payload": {"i": i}, "delay_seconds": 600} for i in range(130)), on_progress=progress.append
    )
    assert [r.index for r in results] == list(range(130)) and {r.status for r in results} == {201}
    assert progress == [100, 30]
    assert client.get(results[129].task.id).payload == {"i": 129}  # type: ignore[union-attr]


async def test_a_task_refused_in_a_later_batch_writes_nothing_through_the_async_client(
    aclient: AsyncAtfClient, item_count: Any
) -> None:
    requests: list[dict[str, Any]] = [{"lambda": "work", "delay_seconds": 600} for _ in range(150)]
    requests[120] = {"lambda": "nope"}
    before = item_count()
    with pytest.raises(UnknownLambda) as refused:
        await aclient.schedule_many(requests)
    assert refused.value.field == "tasks[120].lambda" and item_count() == before


async def test_schedules_chains_and_dead_letters_through_the_async_client(
    aclient: AsyncAtfClient, client: AtfClient, store: Any
) -> None:
    name = f"async-{uuid.uuid4().hex[:8]}"
    put = await aclient.put_schedule(name, {"lambda": "chore", "every_seconds": 3600})
    view = await aclient.get_schedule(name, upcoming=2)
    assert view == client.get_schedule(name, upcoming=2) and view.name == put.name and len(view.upcoming) == 2
    assert put in await aclient.schedules("chore")
    assert (await aclient.pause_schedule(name)).paused and not (await aclient.resume_schedule(name)).paused
    await aclient.delete_schedule(name)
    with pytest.raises(NotFound):
        await aclient.get_schedule(name)

    links = [{"name": "a", "lambda": "chore"}, {"name": "b", "lambda": "chore", "after": ["a"]}]
    chain = await aclient.create_chain({"links": links})
    assert (await aclient.get_chain(chain.id)) == client.get_chain(chain.id)
    assert {link.status for link in (await aclient.cancel_chain(chain.id)).links} == {TaskStatus.CANCELLED}

    collection = f"adl-{uuid.uuid4().hex[:8]}"
    dead = [kill(store, client.schedule("chore", collection=collection).id, "KeyError").id for _ in range(2)]
    letters = await aclient.dead_letters("chore", collection=collection)
    assert [d.id for d in letters] == dead and letters == client.dead_letters("chore", collection=collection)
    window = {"since": letters[0].died_at, "until": letters[1].died_at + timedelta(seconds=1)}  # a query with times
    dry = await aclient.redrive("chore", collection=collection, dry_run=True, **window)
    assert [d.id for d in dry.matched] == dead and dry.changed == 0
    assert (await aclient.redrive("chore", collection=collection, limit=1)).changed == 1
    assert (await aclient.discard("chore", collection=collection)).changed == 1
    assert [client.get(i).status for i in dead] == [TaskStatus.NEW, TaskStatus.FATAL_FAILURE]


async def test_the_api_errors_are_the_core_error_classes(aclient: AsyncAtfClient) -> None:
    with pytest.raises(UnknownLambda) as unknown:
        await aclient.schedule("nope")
    assert (unknown.value.status, unknown.value.field) == (400, "lambda")
    with pytest.raises(NotFound):
        await aclient.get("f" * 32)
    await aclient.schedule("work", {"v": 1}, key="async-conflict", delay_seconds=600)
    with pytest.raises(Conflict):
        await aclient.schedule("work", {"v": 2}, key="async-conflict", delay_seconds=600)


async def test_many_calls_at_once_share_one_client(aclient: AsyncAtfClient, client: AtfClient) -> None:
    scheduled = await asyncio.gather(*(aclient.schedule("mail", {"n": n}, delay_seconds=600) for n in range(25)))
    assert len({task.id for task in scheduled}) == 25 and all(task.created for task in scheduled)
    read = await asyncio.gather(*(aclient.get(task.id) for task in scheduled))
    assert [task.payload for task in read] == [{"n": n} for n in range(25)]


@pytest.mark.parametrize("payload", NOT_OBJECTS, ids=repr)
@pytest.mark.parametrize(("call", "field"), [s[1:] for s in SDK_SURFACES], ids=[s[0] for s in SDK_SURFACES])
async def test_a_payload_that_is_not_an_object_is_refused_before_sending(
    counted: tuple[str, list[Event]], call: Callable[[Any, Any], Any], field: str, payload: Any
) -> None:
    url, seen = counted
    async with AsyncAtfClient(url, retry=FAST) as atf:
        with pytest.raises(WrongType) as caught:
            await call(atf, payload)
    assert (caught.value.code, caught.value.field) == ("wrong_type", field)
    assert seen == [], "nothing was sent"


@pytest.mark.parametrize("call", [c[1] for c in SAME_AS_THE_API], ids=[c[0] for c in SAME_AS_THE_API])
async def test_bad_input_raises_what_the_sync_client_raises_and_sends_nothing(
    counted: tuple[str, list[Event]], client: AtfClient, call: Callable[[Any], Any]
) -> None:
    with pytest.raises(AtfError) as sync:
        call(client)
    url, seen = counted
    async with AsyncAtfClient(url, retry=FAST) as atf:
        with pytest.raises(AtfError) as not_sync:
            await call(atf)
    assert type(not_sync.value) is type(sync.value)
    assert not_sync.value.to_dict() == sync.value.to_dict()
    assert seen == [], "nothing was sent"


async def test_from_env_reads_the_api_url(monkeypatch: pytest.MonkeyPatch, stack: LocalStack) -> None:
    monkeypatch.setenv(API_URL_ENV, stack.api_url + "/")
    async with AsyncAtfClient.from_env(retry=FAST) as atf:
        assert isinstance(atf, AsyncAtfClient) and atf.endpoint == stack.api_url and atf.region == "us-east-1"
        assert await atf.gates() is not None


async def test_requests_are_signed_for_execute_api(counted: tuple[str, list[Event]]) -> None:
    url, seen = counted
    async with AsyncAtfClient(url, region="us-east-1") as atf:
        await atf.schedule("work", delay_seconds=600)
    authorization = seen[0]["headers"]["Authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=local/")
    assert "/us-east-1/execute-api/aws4_request" in authorization and "X-Amz-Date" in seen[0]["headers"]
    # Signed for another region than the API's: refused as API Gateway refuses it, naming the region signed for
    async with AsyncAtfClient(url, region="eu-west-1") as atf:
        with pytest.raises(MissingAuthentication, match="scoped to a valid region, not 'eu-west-1'"):
            await atf.schedule("work", delay_seconds=600)
    assert len(seen) == 1


def scripted(script: list[int | str], seen: list[Event]) -> Callable[[Event, Any], Event]:
    """A stand-in answering the n-th request as script[n] says (its last entry repeats): "real" for the
    real frontend, "lost" for the real frontend's write with a 502 instead of its answer, or a status
    with the error API Gateway or the handler would send."""

    def answer(event: Event, context: Any) -> Event:
        seen.append(event)
        step = script[min(len(seen), len(script)) - 1]
        if step == "real":
            return lambda_handler(event, context)
        if step == "lost":
            lambda_handler(event, context)
            return _reply(502, {"message": "Internal server error"})
        code = {429: "throttled", 500: "error"}.get(int(step), "unavailable")
        return _reply(int(step), {"code": code, "message": "not now"}, {"Retry-After": "0"})

    return answer


async def test_throttling_and_server_errors_are_retried_with_the_same_key(serve: Any) -> None:
    seen: list[Event] = []
    async with AsyncAtfClient(serve(scripted([429, "lost", "real"], seen)), retry=FAST) as atf:
        task = await atf.schedule("work", {"order": 7}, delay_seconds=600)
    bodies = [json.loads(event["body"]) for event in seen]
    assert len(bodies) == 3 and bodies[0] == bodies[1] == bodies[2] and bodies[0]["key"]
    assert not task.created, "the retry found the task its lost answer had made"


@pytest.mark.parametrize(("status", "error"), [(429, Throttled), (500, AtfError), (503, Unavailable)])
async def test_retries_give_up_with_the_last_error(serve: Any, status: int, error: type[AtfError]) -> None:
    seen: list[Event] = []
    async with AsyncAtfClient(serve(scripted([status], seen)), retry=FAST) as atf:
        with pytest.raises(error) as caught:
            await atf.get("a" * 32)
    assert len(seen) == FAST.attempts and caught.value.status == status


async def test_a_dead_endpoint_is_unavailable_after_the_retries() -> None:
    async with AsyncAtfClient(f"http://127.0.0.1:{free_port()}", retry=FAST) as atf:
        with pytest.raises(Unavailable, match="GET /v1/gates"):
            await atf.gates()


async def test_batch_items_the_store_throttled_are_resent_alone(serve: Any) -> None:
    seen: list[Event] = []

    def throttle_the_second_item_once(event: Event, context: Any) -> Event:
        reply = scripted(["real"], seen)(event, context)
        if len(seen) == 1:  # as if the store had throttled item 1 and written nothing for it
            body = json.loads(reply["body"])
            body["results"][1] = {"index": 1, "status": 503, "error": {"code": "unavailable", "message": "retry"}}
            reply["body"] = json.dumps(body)
        return reply

    async with AsyncAtfClient(serve(throttle_the_second_item_once), retry=FAST) as atf:
        results = await atf.schedule_many([{"lambda": "work", "payload": {"i": i}} for i in range(3)])
    sent = [json.loads(event["body"])["tasks"] for event in seen]
    assert [len(batch) for batch in sent] == [3, 1] and sent[1][0] == sent[0][1]
    assert [(r.index, r.status) for r in results] == [(0, 201), (1, 200), (2, 201)]


async def test_wait_follows_a_task_to_its_end_on_a_live_stack(live: LiveStack) -> None:
    async with AsyncAtfClient(live.api_url, region="us-east-1", retry=FAST) as atf:
        flaky = await atf.schedule("flaky", {"works_from": 2})
        done = await atf.wait(flaky.id, timeout_s=60, poll_s=0.2)
        assert (done.status, done.attempt, [e.type for e in done.errors]) == (TaskStatus.SUCCESS, 2, ["ValueError"])
        later = await atf.schedule("tick", delay_seconds=600)
        with pytest.raises(TimeoutError, match="still new"):
            await atf.wait(later.id, timeout_s=0.3, poll_s=0.1)
