"""Gates set at once, on the embedded AWS's server (whose conditional writes are atomic, as DynamoDB's): the
gates item's budget holds however many writers race for its last room, and no gate that was set is lost.
(In-process moto can let two conditional writes both win, so this runs against the server.)"""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest

from atf_core.aws import make_clients
from atf_core.config import StackConfig
from atf_core.errors import Conflict
from atf_core.schema import Gate, GateAction
from atf_core.store import codec
from atf_core.store import gates as gates_item
from atf_core.store.tasks import DynamoTaskStore
from tests.conftest import TEST_CONFIG

WRITERS, ROOM, ROUNDS = 8, 5, 3
CONFIG = StackConfig.model_validate(TEST_CONFIG)
T = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def _gate(collection: str) -> Gate:
    return Gate(lambda_="work", collection=collection, action=GateAction.PAUSE, reason="é" * 500, created_at=T)


def test_writers_racing_for_the_last_room_fill_it_exactly_and_lose_none(
    endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = gates_item.gate_bytes("work/r0-0", codec.gate_to_plain(_gate("r0-0")))
    monkeypatch.setattr(gates_item, "MAX_GATES_BYTES", ROOM * one + one // 2)
    for round_ in range(ROUNDS):
        set_, refused = _race(endpoint, [f"r{round_}-{n}" for n in range(WRITERS)])

        store = DynamoTaskStore(make_clients(endpoint).dynamodb, CONFIG)
        stored = {g.collection for g in store.gates()}
        assert (len(set_), len(refused)) == (ROOM, WRITERS - ROOM), f"round {round_}"
        assert stored == set(set_), "every gate set is stored, and no other"
        for collection in stored:
            assert store.delete_gate("work", collection)


def _race(endpoint: str, collections: list[str]) -> tuple[list[str], list[str]]:
    """Each writer, on a client of its own, sets one gate at the same moment; which were set, which refused."""
    set_: list[str] = []
    refused: list[str] = []
    start = threading.Barrier(len(collections))

    def writer(collection: str) -> None:
        store = DynamoTaskStore(make_clients(endpoint).dynamodb, CONFIG)
        start.wait()
        try:
            store.put_gate(_gate(collection))
            set_.append(collection)
        except Conflict:
            refused.append(collection)

    threads = [threading.Thread(target=writer, args=(c,)) for c in collections]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return set_, refused
