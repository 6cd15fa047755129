"""A lambda's own schedule put (PUT /v1/lambdas/{lambda}/schedules/{name}) never replaces another lambda's
schedule of the same name, even one made between its read and its write: the write itself is conditioned on
the spec it read (which names the lambda), not only on the version (which restarts when the schedule is
deleted and made again)."""

from __future__ import annotations

from typing import Any

import pytest

from atf_core.config import StackConfig
from atf_core.errors import Conflict
from atf_core.periodic_schedules import Schedules
from atf_core.recurrence import ScheduleSpec
from atf_core.store.items import ItemStore, schedule_id
from atf_core.store.tasks import DynamoTaskStore


def _spec(lambda_name: str) -> ScheduleSpec:
    return ScheduleSpec.model_validate({"lambda": lambda_name, "every_seconds": 3600})


class Interleaved(ItemStore):
    """An item store that, right after the put's first read of the schedule, lets another writer delete it
    and make it again for another lambda: the interleaving two frontends can produce."""

    def __init__(self, *args: Any, meanwhile: Any = None) -> None:
        super().__init__(*args)
        self.meanwhile = meanwhile

    def get(self, item_id: str) -> dict[str, Any] | None:
        found = super().get(item_id)
        if self.meanwhile is not None:
            meanwhile, self.meanwhile = self.meanwhile, None
            meanwhile()
        return found


def test_a_schedule_made_again_for_another_lambda_between_read_and_write_is_not_replaced(
    aws: Any, config: StackConfig
) -> None:
    store = DynamoTaskStore(aws.dynamodb, config)
    plain = Schedules(store, ItemStore(aws.dynamodb, config.table_name), config)
    plain.put("nightly", _spec("work"))  # version 1, work's

    def other_lambda_takes_the_name() -> None:
        plain.delete("nightly")
        plain.put("nightly", _spec("sleepy"))  # version 1 again, sleepy's

    items = Interleaved(aws.dynamodb, config.table_name, meanwhile=other_lambda_takes_the_name)
    with pytest.raises(Conflict, match="taken by another lambda"):
        Schedules(store, items, config).put("nightly", _spec("work"), owner="work")
    assert plain.get("nightly").spec.lambda_ == "sleepy"


def test_a_lambdas_put_replaces_its_own_and_refuses_another_lambdas(aws: Any, config: StackConfig) -> None:
    schedules = Schedules(DynamoTaskStore(aws.dynamodb, config), ItemStore(aws.dynamodb, config.table_name), config)
    schedules.put("hourly", _spec("work"), owner="work")
    assert schedules.put("hourly", _spec("work"), owner="work").version == 2
    with pytest.raises(Conflict, match="taken by another lambda"):
        schedules.put("hourly", _spec("sleepy"), owner="sleepy")
    assert schedules.put("hourly", _spec("sleepy")).spec.lambda_ == "sleepy"  # the all-lambdas route may
    assert ItemStore(aws.dynamodb, config.table_name).get(schedule_id("hourly")) is not None
