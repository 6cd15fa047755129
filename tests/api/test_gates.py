"""Gates through the SDK: pause, drop, list, resume."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from atf_core.errors import Conflict, NotFound
from atf_core.schema import GateAction
from atf_core.store import gates as gates_item
from atf_sdk.client import AtfClient


def test_pause_drop_list_and_resume(client: AtfClient) -> None:
    until = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    paused = client.pause("work", reason="deploy")
    dropped = client.drop("work", "spam", until=until, reason="abuse")
    assert (paused.action, paused.collection, paused.reason) == (GateAction.PAUSE, None, "deploy")
    assert (dropped.action, dropped.collection, dropped.until) == (GateAction.DROP, "spam", until)
    scopes = {(g.lambda_, g.collection, g.action) for g in client.gates()}
    assert {("work", None, GateAction.PAUSE), ("work", "spam", GateAction.DROP)} <= scopes
    client.resume("work")
    client.resume("work", "spam")
    assert not [g for g in client.gates() if g.lambda_ == "work"]
    with pytest.raises(NotFound):
        client.resume("work")


def test_an_expired_gate_is_no_longer_listed(client: AtfClient) -> None:
    client.pause("mail", "brief", until=datetime.now(UTC) + timedelta(seconds=1))
    assert any(g.collection == "brief" for g in client.gates())
    time.sleep(1.2)
    assert not any(g.collection == "brief" for g in client.gates())


def test_a_gate_past_the_gates_budget_is_a_409_naming_its_field_and_changes_nothing(
    client: AtfClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the frontend runs in this process: a small budget stands for the item's 256 KiB
    monkeypatch.setattr(gates_item, "MAX_GATES_BYTES", 50_000)
    set_: list[str] = []
    try:
        with pytest.raises(Conflict) as refused:
            while len(set_) < 100:  # ~1 KB a gate: ~48 fit
                client.pause("work", f"full-{len(set_)}", reason="é" * 500)
                set_.append(f"full-{len(set_)}")
        before = client.gates()
        with pytest.raises(Conflict):
            client.pause("work", "one-more", reason="é" * 500)

        assert 30 < len(set_) < 50 and (refused.value.status, refused.value.field) == (409, "collection")
        assert "lift some first" in refused.value.message and client.gates() == before
    finally:
        for collection in set_:
            client.resume("work", collection)


def test_a_gate_body_may_say_null_for_no_reason_as_for_no_end(client: AtfClient, raw: Any) -> None:
    # Given a gate body from a client that writes its unset fields as null
    body = {"action": "pause", "until": None, "reason": None}

    # When it is put on a collection
    reply = raw("PUT", "/v1/gates/work/null-fields", body)

    # Then the gate is set, without an end and without a reason
    try:
        assert reply.status == 200, reply.body
        (gate,) = [g for g in client.gates() if g.collection == "null-fields"]
        assert (gate.action, gate.until, gate.reason) == (GateAction.PAUSE, None, "")
    finally:
        client.resume("work", "null-fields")
