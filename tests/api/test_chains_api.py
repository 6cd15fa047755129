"""Chains through the SDK: create (idempotent by key), read as one unit, cancel the rest, retry a
failed link, on the quiet stack; on the live one, a chain runs in order and finishes after a retry."""

from __future__ import annotations

import uuid
from itertools import pairwise
from typing import Any

import pytest

from atf_core.chains import ChainStatus, LinkView
from atf_core.errors import Conflict, NotFound, UnknownLambda
from atf_core.schema import TaskStatus
from atf_sdk.client import AtfClient
from tests.api.live import LiveStack
from tests.api.states import advance, finish, kill


def album(key: str | None = None, lambda_name: str = "chore") -> dict[str, Any]:
    """fetch, then resize and notify side by side, then report once both are done."""
    links = [
        {"name": "fetch", "lambda": lambda_name, "payload": {"album": 42}},
        {"name": "resize", "lambda": lambda_name, "after": ["fetch"]},
        {"name": "notify", "lambda": lambda_name, "after": ["fetch"], "collection": "bulk"},
        {"name": "report", "lambda": lambda_name, "after": ["resize", "notify"], "priority": "high"},
    ]
    return {"links": links, "key": key or uuid.uuid4().hex}


def states(links: list[LinkView]) -> dict[str, TaskStatus]:
    return {link.name: link.status for link in links}


def test_a_chain_is_created_with_its_roots_new_and_the_rest_waiting(client: AtfClient, raw: Any) -> None:
    chain = client.create_chain(album())
    assert chain.status is ChainStatus.RUNNING
    assert states(chain.links) == {
        "fetch": TaskStatus.NEW,
        "resize": TaskStatus.WAITING,
        "notify": TaskStatus.WAITING,
        "report": TaskStatus.WAITING,
    }
    links = {link.name: link for link in chain.links}
    report = client.get(links["report"].task_id)
    assert (report.chain, report.priority, report.lambda_) == (chain.id, "high", "chore")
    assert client.get(links["notify"].task_id).collection == "bulk"
    assert client.get_chain(chain.id) == chain


def test_the_same_key_finds_the_same_chain_and_another_chain_conflicts(raw: Any, item_count: Any) -> None:
    body = album(key=f"album-{uuid.uuid4().hex[:6]}")
    first, again = raw("POST", "/v1/chains", body), raw("POST", "/v1/chains", body)
    assert (first.status, again.status) == (201, 200) and first.body == again.body
    before = item_count()
    clash = raw("POST", "/v1/chains", {"links": body["links"][:1], "key": body["key"]})
    assert (clash.status, clash.body["code"], clash.body["field"]) == (409, "conflict", "key")
    assert item_count() == before


def test_cancelling_cancels_the_links_not_started(client: AtfClient, store: Any) -> None:
    chain = client.create_chain(album())
    advance(store, chain.links[0].task_id, TaskStatus.PROCESSING)
    cancelled = client.cancel_chain(chain.id)
    assert states(cancelled.links)["fetch"] is TaskStatus.PROCESSING, "a running link finishes"
    assert {states(cancelled.links)[n] for n in ("resize", "notify", "report")} == {TaskStatus.CANCELLED}
    assert cancelled.status is ChainStatus.RUNNING  # until fetch ends
    finish(store, chain.links[0].task_id)
    assert client.get_chain(chain.id).status is ChainStatus.CANCELLED


def test_only_a_dead_letter_link_can_be_retried(client: AtfClient, store: Any) -> None:
    chain = client.create_chain({"links": [{"name": "only", "lambda": "chore"}]})
    with pytest.raises(Conflict, match="only a dead letter"):
        client.retry_link(chain.id, "only")
    with pytest.raises(NotFound):
        client.retry_link(chain.id, "missing")
    kill(store, chain.links[0].task_id, "KeyError")
    assert client.get_chain(chain.id).status is ChainStatus.FAILED
    retried = client.retry_link(chain.id, "only", budget=4)
    only = client.get(retried.links[0].task_id)
    assert retried.status is ChainStatus.RUNNING and (only.status, only.max_attempts) == (TaskStatus.NEW, 5)


def test_a_links_time_limit_is_its_tasks(client: AtfClient) -> None:
    chain = client.create_chain({"links": [{"name": "only", "lambda": "chore", "timeout_seconds": 30}]})
    assert client.get(chain.links[0].task_id).timeout_seconds == 30


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"links": []}, "links"),
        ({"links": [{"name": "a", "lambda": "chore", "after": ["a"]}]}, "links[0].after"),
        ({"links": [{"name": "a", "lambda": "chore"}, {"name": "a", "lambda": "chore"}]}, "links[1].name"),
        ({"links": [{"name": "a", "lambda": "chore", "after": ["z"]}]}, "links[0].after"),
        (  # a cycle further in is named at a link on it
            {
                "links": [
                    {"name": "a", "lambda": "chore"},
                    {"name": "b", "lambda": "chore", "after": ["a", "c"]},
                    {"name": "c", "lambda": "chore", "after": ["b"]},
                ]
            },
            "links[1].after",
        ),
        ({"links": [{"name": "a b", "lambda": "chore"}]}, "links[0].name"),
        ({"links": [{"name": "..", "lambda": "chore"}]}, "links[0].name"),  # no retry's path could name it
        ({"links": [{"name": ".", "lambda": "chore"}]}, "links[0].name"),
        ({"links": [{"name": "a", "lambda": "chore", "collection": ".."}]}, "links[0].collection"),
        ({"links": [{"name": "a", "lambda": "chore"}, {"name": "b", "lambda": "nope"}]}, "links[1].lambda"),
        ({"links": [{"name": "a", "lambda": "chore", "priority": "low"}]}, "links[0].priority"),
        ({"links": [{"name": "a", "lambda": "chore", "payload": {"x": "y" * 200_000}}]}, "links"),
        ({"links": [{"name": "a", "lambda": "chore"}], "colour": "red"}, "colour"),
        ({"links": [{"name": "a", "lambda": "chore", "timeout_seconds": 0}]}, "links[0].timeout_seconds"),
    ],
)
def test_bad_chains_are_400s_and_write_nothing(raw: Any, item_count: Any, body: dict[str, Any], field: str) -> None:
    before = item_count()
    reply = raw("POST", "/v1/chains", body)
    assert (reply.status, reply.body["field"]) == (400, field), reply.body
    assert item_count() == before


def test_unknown_chains_and_malformed_ids(client: AtfClient, raw: Any) -> None:
    with pytest.raises(NotFound):
        client.get_chain("0" * 32)
    with pytest.raises(UnknownLambda):
        client.create_chain({"links": [{"name": "a", "lambda": "nope"}]})
    reply = raw("GET", "/v1/chains/not-a-chain")
    assert (reply.status, reply.body["field"]) == (400, "id")
    assert raw("POST", "/v1/chains/" + "0" * 32 + "/links/a/retry", {"budget": 0}).body["field"] == "budget"


def test_a_chain_runs_in_order_and_finishes_after_a_failed_link_is_retried(live: LiveStack) -> None:
    client = live.client
    links = [
        {"name": "extract", "lambda": "step"},
        {"name": "transform", "lambda": "step", "after": ["extract"], "payload": {"works_from": 2}},
        {"name": "load", "lambda": "step", "after": ["transform"]},
    ]
    chain = client.create_chain({"links": links})
    failed = live.wait_for(lambda: client.get_chain(chain.id), lambda c: c.status is not ChainStatus.RUNNING)
    assert failed.status is ChainStatus.FAILED
    assert states(failed.links) == {
        "extract": TaskStatus.SUCCESS,
        "transform": TaskStatus.DEAD_LETTER,
        "load": TaskStatus.WAITING,
    }
    client.retry_link(chain.id, "transform")
    done = live.wait_for(lambda: client.get_chain(chain.id), lambda c: c.status is not ChainStatus.RUNNING)
    assert done.status is ChainStatus.SUCCEEDED
    assert [(link.name, link.attempt) for link in done.links] == [("extract", 1), ("transform", 2), ("load", 1)]
    tasks = [client.get(link.task_id) for link in done.links]
    for parent, child in pairwise(tasks):
        assert parent.finished_at is not None and child.claimed_at is not None
        assert child.claimed_at >= parent.finished_at, "a link starts only after its parent has succeeded"


def test_a_link_reads_what_its_parents_returned(live: LiveStack) -> None:
    links = [
        {"name": "count", "lambda": "step", "payload": {"returns": {"rows": 3}}},
        {"name": "sum", "lambda": "step", "payload": {"returns": 42}},
        {"name": "quiet", "lambda": "step"},
        {"name": "report", "lambda": "step", "after": ["count", "sum", "quiet"], "payload": {"echo": True}},
    ]
    chain = live.client.create_chain({"links": links})
    report = next(link for link in live.client.get_chain(chain.id).links if link.name == "report")
    assert live.client.result(report.task_id, wait=30) == {"count": {"rows": 3}, "sum": 42, "quiet": None}
