"""Each component names what it is built from once (its PARTS, beside its composition root), and atf_cdk
derives its role from those parts' declared calls. Here each component is built as its root builds it,
and every part with declared calls it creates must be named among its PARTS (as a class, or by the methods
of it the component uses), and every part named must be one it creates: so a store class a component starts
to use cannot go ungranted, nor one it stopped using stay granted."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest

from atf_core.calls import Part, declarations
from atf_core.clock import process_clock
from atf_core.config import CONFIG_ENV, StackConfig
from atf_core.item_access import ItemAccess
from atf_core.queues import QueueDirectory
from atf_core.store.counters import Counters
from atf_core.store.index import IndexStore
from atf_core.store.items import ItemStore
from atf_core.store.scan import TaskScan
from atf_core.store.tasks import DynamoTaskStore
from atf_core.telemetry import MetricBuffer
from atf_sdk.worker import parts as worker_parts
from atf_sdk.worker.controller import Controller
from atf_sdk.worker.deletes import DeleteBatcher
from atf_sdk.worker.executor import build_runner
from atf_sdk.worker.host import HostSettings, WorkerHost
from functions.consumer import handler as consumer_handler
from functions.consumer import parts as consumer_parts
from functions.frontend import parts as frontend_parts
from functions.frontend import services as frontend_services

# Every class with declared calls a component may be built from.
DECLARING = (
    DynamoTaskStore,
    ItemStore,
    IndexStore,
    Counters,
    TaskScan,
    QueueDirectory,
    Controller,
    DeleteBatcher,
    ItemAccess,
)


@pytest.fixture
def created(monkeypatch: pytest.MonkeyPatch) -> set[type]:
    """The declaring classes instantiated from here on, but those one of them builds for itself (the task
    store's index, the controller's queue directory): what it calls through them it declares."""
    found: set[type] = set()
    for cls in DECLARING:
        assert declarations(cls), cls
        monkeypatch.setattr(cls, "__init__", _recording(cls, cls.__init__, found))
    return found


def _recording(cls: type, init: Callable[..., None], found: set[type]) -> Callable[..., None]:
    def record(self: Any, *args: Any, **kwargs: Any) -> None:
        caller = sys._getframe(1).f_locals.get("self")
        if not isinstance(caller, DECLARING):
            found.add(cls)
        init(self, *args, **kwargs)

    return record


def _classes_of(parts: tuple[Part, ...]) -> set[type]:
    """The class of each part: itself, or the class a method part belongs to."""
    by_name = {cls.__qualname__: cls for cls in DECLARING}
    return {part if isinstance(part, type) else by_name[part.__qualname__.split(".")[0]] for part in parts}


def test_the_frontend_is_built_from_its_parts(
    aws: Any, config: StackConfig, created: set[type], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONFIG_ENV, config.model_dump_json())
    frontend_services._build.__wrapped__(config.model_dump_json(), None, None)
    assert created == _classes_of(frontend_parts.PARTS)


def test_the_consumer_is_built_from_its_parts(
    aws: Any, config: StackConfig, created: set[type], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONFIG_ENV, config.model_dump_json())
    for cached in (consumer_handler._config, consumer_handler._clients):
        cached.cache_clear()
    try:
        consumer_handler._consumer.__wrapped__(0, 1)  # the group that fires schedules and sweeps chains
        consumer_handler._due_soon.__wrapped__(0, 1)
    finally:
        for cached in (consumer_handler._config, consumer_handler._clients):
            cached.cache_clear()
    assert created == _classes_of(consumer_parts.PARTS)


def test_a_worker_host_and_its_executors_are_built_from_their_parts(
    aws: Any, config: StackConfig, created: set[type]
) -> None:
    host = WorkerHost(config, HostSettings("tests.e2e.lambdas:lambdas"), clients=aws)
    build_runner(aws, config, host.lambda_names[0], lambda payload: None, MetricBuffer(service="t"), process_clock)
    host.controller._deletes.close()
    host._release()
    assert created == _classes_of(worker_parts.PARTS)
