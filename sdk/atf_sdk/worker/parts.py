"""What a worker host and its executors are built from (host.WorkerHost, executor.build_runner): each
worker service's task role is derived from these parts' declared calls (atf_core.calls.actions_of, in
atf_cdk).

The controller receives, hands back and (through its DeleteBatcher) deletes messages, and claims; the
executors record outcomes, beat, take and give back limit slots (Counters) and advance a chain when a
link ends. Of the task store and the items they use only these methods: a host never creates a task,
reads the due index or deletes an item, so its role holds no dynamodb:Query or DeleteItem."""

from __future__ import annotations

from atf_core.calls import Part
from atf_core.store.counters import Counters
from atf_core.store.items import ItemStore
from atf_core.store.tasks import DynamoTaskStore
from atf_sdk.worker.controller import Controller

PARTS: tuple[Part, ...] = (
    Controller,
    Counters,
    DynamoTaskStore.get_many,
    DynamoTaskStore.transition,
    DynamoTaskStore.gates,
    ItemStore.get,
    ItemStore.put,
)
