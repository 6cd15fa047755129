"""How soon a worker host sees a gate change: a pause of its lambda is read again more often than the gates
otherwise are, so the held tasks start soon after the resume; while nothing is paused, no more reads."""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any

import pytest

from atf_core.config import StackConfig
from atf_core.gating import Gating
from atf_core.schema import GateAction
from atf_core.store.tasks import DynamoTaskStore
from atf_sdk.worker import controller as controller_module
from atf_sdk.worker.controller import Controller, ControllerSettings
from tests.conftest import work_controller

Host = tuple[Controller, Gating, list[int]]
SETTINGS = ControllerSettings(receive_wait_s=0, gate_refresh_s=60, paused_gate_refresh_s=0.5, prefetch_per_lambda=None)


class Clock(ModuleType):
    """The controller module's `time`, with a monotonic clock the test moves; the rest is the real module."""

    def __init__(self) -> None:
        super().__init__("time")
        self.now = time.monotonic()

    def monotonic(self) -> float:
        return self.now

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(controller_module, "time", fake)
    return fake


@pytest.fixture
def host(aws: Any, config: StackConfig, drained: list[Controller], clock: Clock) -> Host:
    """A controller of `work` whose gates are otherwise read once a minute, and a count of its gate reads."""
    controller, store, _ = work_controller(aws, config, drained, settings=SETTINGS, limits=False)
    reads: list[int] = []
    read = store.gates

    def counted() -> Any:
        reads.append(1)
        return read()

    store.gates = counted  # type: ignore[method-assign]
    assert isinstance(store, DynamoTaskStore)
    return controller, Gating(store, config), reads


def receives(controller: Controller) -> bool:
    """Whether the receiver of work/normal asks SQS now (False: it waits on a pause)."""
    return controller._receive_once("work", "normal", 0)


def test_a_resume_is_seen_within_the_paused_refresh_not_the_gate_refresh(host: Host, clock: Clock) -> None:
    controller, gating, reads = host
    # Given a paused lambda, as its host has read it
    gating.set("work", None, GateAction.PAUSE, None)
    assert not receives(controller)
    # When the pause is lifted
    gating.lift("work", None)
    # Then the host keeps its view for the paused refresh (no read on every turn of its loop)
    clock.now += 0.4
    assert not receives(controller) and len(reads) == 1
    # And sees the resume once that refresh has passed, a minute before the gates' own refresh
    clock.now += 0.2
    assert receives(controller) and len(reads) == 2


def test_while_nothing_is_paused_the_gates_are_read_at_the_gate_refresh_only(host: Host, clock: Clock) -> None:
    controller, gating, reads = host
    # Given a host that has read the gates, none of them a pause of its lambda
    gating.set("work", "held", GateAction.PAUSE, None)  # a collection's pause: the receivers go on
    assert receives(controller) and len(reads) == 1
    # When its receivers turn for most of the gate refresh
    for _ in range(10):
        clock.now += 5
        assert receives(controller)
    # Then no gate was read again, until the refresh has passed
    assert len(reads) == 1
    clock.now += 11
    assert receives(controller) and len(reads) == 2
