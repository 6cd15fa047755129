"""What the frontend is built from (services._build): its role's policy is derived from these parts'
declared calls (atf_core.calls.actions_of, in atf_cdk). It makes no AWS call of its own outside them."""

from __future__ import annotations

from atf_core.calls import Part
from atf_core.item_access import ItemAccess
from atf_core.store.index import IndexStore
from atf_core.store.items import ItemStore
from atf_core.store.tasks import DynamoTaskStore

PARTS: tuple[Part, ...] = (DynamoTaskStore, ItemStore, IndexStore, ItemAccess)
