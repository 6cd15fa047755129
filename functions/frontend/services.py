"""The frontend's collaborators, built once per configuration and endpoint.

A Lambda container sees one configuration for life; keying the cache on the
environment also lets one test process serve stacks that differ.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache

from atf_core.aws import ENDPOINT_ENV, make_clients
from atf_core.bulk import BulkChanges
from atf_core.chains import Chains
from atf_core.clock import process_clock
from atf_core.config import CONFIG_ENV, CONFIG_FILE_ENV, StackConfig
from atf_core.deadletters import DeadLetters
from atf_core.gating import Gating
from atf_core.item_access import ItemAccess
from atf_core.periodic_schedules import Schedules
from atf_core.stats import Stats
from atf_core.store.index import IndexStore
from atf_core.store.items import ItemStore
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling


@dataclass(frozen=True)
class Services:
    config: StackConfig
    scheduling: Scheduling
    gating: Gating
    stats: Stats
    dead_letters: DeadLetters
    schedules: Schedules
    chains: Chains
    bulk: BulkChanges
    item_access: ItemAccess


def services() -> Services:
    return _build(os.environ.get(CONFIG_ENV), os.environ.get(CONFIG_FILE_ENV), os.environ.get(ENDPOINT_ENV))


@lru_cache(maxsize=4)
def _build(config_json: str | None, config_file: str | None, endpoint: str | None) -> Services:
    config = StackConfig.from_env()
    clients = make_clients(endpoint, iam=True)
    store = DynamoTaskStore(clients.dynamodb, config)
    items = ItemStore(clients.dynamodb, config.table_name)
    chains = Chains(store, items, config, process_clock)
    return Services(
        config,
        Scheduling(store, config, process_clock),
        Gating(store, config),
        Stats(IndexStore(clients.dynamodb, config.table_name), items, config),
        DeadLetters(store, config, process_clock, rejoin_chain=chains.rejoin),
        Schedules(store, items, config, process_clock),
        chains,
        BulkChanges(store, config, process_clock),
        ItemAccess(clients.iam),
    )
