"""What the store consumer is built from (handler._consumer and _due_soon): its role's policy is derived
from these parts' declared calls (atf_core.calls.actions_of, in atf_cdk).

Of the items it uses what schedules and chains read and save, never a delete (the frontend deletes a
schedule): named method by method, so that its role holds no dynamodb:DeleteItem."""

from __future__ import annotations

from atf_core.calls import Part
from atf_core.queues import QueueDirectory
from atf_core.store.index import IndexStore
from atf_core.store.items import ItemStore
from atf_core.store.tasks import DynamoTaskStore

PARTS: tuple[Part, ...] = (
    DynamoTaskStore,
    IndexStore,
    QueueDirectory,
    ItemStore.get,
    ItemStore.put,
    ItemStore.partition,
)
