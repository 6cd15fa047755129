"""A payload up to its limit (256 KiB as UTF-8 JSON) is stored, in a task, a schedule or a chain, whatever its
characters: DynamoDB takes an item of 400 KB, and the item must hold the payload once, not twice, and not as
\\u escapes. (A task's item held its request's JSON as its fingerprint, so a 210 KB payload was over; a
schedule's spec and a chain's fingerprint were written with \\u escapes, 6 bytes for an 'é'.)"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import pytest

from atf_core.errors import Conflict
from atf_core.schema import MAX_PAYLOAD_BYTES, ScheduleRequest, encode_payload
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import build_task
from atf_local.stack import LocalStack
from atf_sdk.client import AtfClient


def _near_the_limit(char: str) -> dict[str, Any]:
    """A payload within 100 bytes of the limit, of one character repeated."""
    room = MAX_PAYLOAD_BYTES - len(encode_payload({"x": ""}).encode()) - 100
    payload = {"x": char * (room // len(char.encode()))}
    assert MAX_PAYLOAD_BYTES - 100 - 4 <= len(encode_payload(payload).encode()) <= MAX_PAYLOAD_BYTES
    return payload


PAYLOADS = [_near_the_limit("a"), _near_the_limit("é"), _near_the_limit("€")]
IDS = ["ascii", "two-byte", "three-byte"]


@pytest.mark.parametrize("payload", PAYLOADS, ids=IDS)
def test_a_task_with_a_payload_at_the_limit_is_stored_and_its_repeat_is_the_same_request(
    client: AtfClient, payload: dict[str, Any]
) -> None:
    key = f"full-{uuid.uuid4().hex}"

    first = client.schedule("work", payload, key=key, delay_seconds=3600)
    again = client.schedule("work", payload, key=key, delay_seconds=3600)

    assert first.created and not again.created and again.id == first.id
    assert client.get(first.id).payload == payload
    with pytest.raises(Conflict):
        client.schedule("work", {**payload, "x": payload["x"][:-1]}, key=key, delay_seconds=3600)


@pytest.mark.parametrize("payload", PAYLOADS, ids=IDS)
def test_a_schedule_with_a_payload_at_the_limit_is_stored(client: AtfClient, payload: dict[str, Any]) -> None:
    name = f"full-{uuid.uuid4().hex[:8]}"
    try:
        client.put_schedule(name, {"lambda": "chore", "cron": "0 3 1 1 *", "payload": payload})
        assert client.get_schedule(name).spec.payload == payload
    finally:
        client.delete_schedule(name)


def test_a_chain_at_its_limit_in_two_byte_characters_is_stored(client: AtfClient) -> None:
    payload = {"x": "é" * 80_000}  # 160 KB: a chain's JSON may take 160 KiB

    chain = client.create_chain({"links": [{"name": "only", "lambda": "work", "payload": payload}]})

    (link,) = client.get_chain(chain.id).links  # read back from the chain's item
    assert client.get(link.task_id).payload == payload


def test_a_repeat_of_a_task_stored_with_a_0_1_0_fingerprint_is_the_same_request(
    client: AtfClient, store: DynamoTaskStore, stack: LocalStack
) -> None:
    # 0.1.0 stored the request's JSON itself as the fingerprint; its tasks are read by the next version
    body = {"lambda": "work", "payload": {"n": 1}, "key": f"old-{uuid.uuid4().hex}", "delay_seconds": 3600}
    request = ScheduleRequest.model_validate(body)
    stored = store.create(build_task(stack.config, request, datetime.now().astimezone()), request.canonical())
    assert stored.created

    again = client.schedule("work", {"n": 1}, key=body["key"], delay_seconds=3600)

    assert (again.id, again.created) == (stored.task.id, False)
    with pytest.raises(Conflict):
        client.schedule("work", {"n": 2}, key=body["key"], delay_seconds=3600)
