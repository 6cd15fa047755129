"""Gates through the SDK: pause, drop, list, resume."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from atf_core.errors import NotFound
from atf_core.schema import GateAction
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
