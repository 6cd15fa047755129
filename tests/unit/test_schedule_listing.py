"""Schedules.in_order lists every schedule by name, once, from after `after` and of one lambda if asked,
reading their states in batches that start small and double up to BatchGetItem's 100 keys: a page that stops
after a few schedules (the frontend's, when payloads are large) has read few more than it answers."""

from __future__ import annotations

from itertools import islice
from typing import Any

import pytest

from atf_core.config import StackConfig
from atf_core.periodic_schedules import FIRST_LIST_READ, Schedules
from atf_core.recurrence import ScheduleSpec
from atf_core.store.items import ItemStore
from atf_core.store.table import BATCH_GET_KEYS
from atf_core.store.tasks import DynamoTaskStore

MANY = 2 * BATCH_GET_KEYS + 30  # past the doubling's cap: 8, 16, 32, 64, 100, then the 10 left
FEW = 40


class Counted(ItemStore):
    """An item store that remembers how many keys each batch read asked for."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.batches: list[int] = []

    def get_many(self, item_ids: Any, fields: tuple[str, ...] = (), consistent: bool = False) -> Any:
        ids = list(item_ids)
        self.batches.append(len(ids))
        return super().get_many(ids, fields, consistent)


def _listed(aws: Any, config: StackConfig, count: int) -> tuple[Schedules, Counted]:
    items = Counted(aws.dynamodb, config.table_name)
    schedules = Schedules(DynamoTaskStore(aws.dynamodb, config), items, config)
    for n in reversed(range(count)):  # put last first: the list's order is the names'
        lambda_name = "sleepy" if n % 3 == 0 else "work"
        schedules.put(f"s{n:04d}", ScheduleSpec.model_validate({"lambda": lambda_name, "every_seconds": 3600}))
    items.batches.clear()
    return schedules, items


@pytest.fixture
def listed(aws: Any, config: StackConfig) -> tuple[Schedules, Counted]:
    return _listed(aws, config, FEW)


def test_every_schedule_comes_once_in_name_order_read_in_doubling_batches(aws: Any, config: StackConfig) -> None:
    schedules, items = _listed(aws, config, MANY)

    names = [schedule.name for schedule in schedules.in_order()]

    assert names == [f"s{n:04d}" for n in range(MANY)]
    assert items.batches == [FIRST_LIST_READ, 16, 32, 64, BATCH_GET_KEYS, 10]


def test_a_list_that_stops_early_reads_only_the_first_batch(listed: tuple[Schedules, Counted]) -> None:
    schedules, items = listed

    first = [schedule.name for schedule in islice(schedules.in_order(), 3)]

    assert first == ["s0000", "s0001", "s0002"]
    assert items.batches == [FIRST_LIST_READ]


def test_after_and_lambda_narrow_the_list(listed: tuple[Schedules, Counted]) -> None:
    schedules, _ = listed

    sleepy_after = [schedule.name for schedule in schedules.in_order(after="s0010", lambda_name="sleepy")]

    assert sleepy_after == [f"s{n:04d}" for n in range(11, FEW) if n % 3 == 0]


def test_a_schedule_deleted_after_the_index_listed_it_is_left_out(listed: tuple[Schedules, Counted]) -> None:
    schedules, _ = listed
    listing = schedules.in_order()
    assert next(listing).name == "s0000"  # the names are listed, and the first batch read

    schedules.delete("s0030")  # in the second batch, not read yet

    names = [schedule.name for schedule in listing]
    assert "s0030" not in names and len(names) == FEW - 2
