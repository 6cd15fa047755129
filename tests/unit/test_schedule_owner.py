"""A lambda's own schedule routes (PUT, DELETE, pause and resume under /v1/lambdas/{lambda}/schedules/{name})
never replace, delete or pause another lambda's schedule of the same name, even one made between their read
and their write: the write itself is conditioned on the spec it read (which names the lambda), not only on
the version (which restarts when the schedule is deleted and made again)."""

from __future__ import annotations

from typing import Any

import pytest

from atf_core.config import StackConfig
from atf_core.errors import Conflict, NotFound
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


def _taken_meanwhile(aws: Any, config: StackConfig) -> tuple[Schedules, Schedules]:
    """work's schedule "nightly", and a Schedules whose first read is followed by sleepy taking the name."""
    plain = Schedules(DynamoTaskStore(aws.dynamodb, config), ItemStore(aws.dynamodb, config.table_name), config)
    plain.put("nightly", _spec("work"))

    def other_lambda_takes_the_name() -> None:
        plain.delete("nightly")
        plain.put("nightly", _spec("sleepy"))

    items = Interleaved(aws.dynamodb, config.table_name, meanwhile=other_lambda_takes_the_name)
    return plain, Schedules(DynamoTaskStore(aws.dynamodb, config), items, config)


def test_a_delete_does_not_take_a_schedule_made_again_for_another_lambda(aws: Any, config: StackConfig) -> None:
    plain, interleaved = _taken_meanwhile(aws, config)
    with pytest.raises(NotFound, match="no schedule 'nightly'"):
        interleaved.delete("nightly", owner="work")
    assert plain.get("nightly").spec.lambda_ == "sleepy"


def test_two_deletes_at_once_the_second_finds_nothing(aws: Any, config: StackConfig) -> None:
    plain = Schedules(DynamoTaskStore(aws.dynamodb, config), ItemStore(aws.dynamodb, config.table_name), config)
    plain.put("nightly", _spec("work"))
    items = Interleaved(aws.dynamodb, config.table_name, meanwhile=lambda: plain.delete("nightly", owner="work"))
    with pytest.raises(NotFound, match="no schedule 'nightly'"):
        Schedules(DynamoTaskStore(aws.dynamodb, config), items, config).delete("nightly", owner="work")


def test_a_delete_of_ones_own_schedule_changed_meanwhile_asks_to_retry(aws: Any, config: StackConfig) -> None:
    plain = Schedules(DynamoTaskStore(aws.dynamodb, config), ItemStore(aws.dynamodb, config.table_name), config)
    plain.put("nightly", _spec("work"))
    every_minute = ScheduleSpec.model_validate({"lambda": "work", "every_seconds": 60})
    items = Interleaved(aws.dynamodb, config.table_name, meanwhile=lambda: plain.put("nightly", every_minute))
    with pytest.raises(Conflict, match="changed while it was deleted"):
        Schedules(DynamoTaskStore(aws.dynamodb, config), items, config).delete("nightly", owner="work")
    assert plain.get("nightly").spec.every_seconds == 60


@pytest.mark.parametrize("paused", [True, False])
def test_a_pause_or_resume_does_not_touch_a_schedule_made_again_for_another_lambda(
    aws: Any, config: StackConfig, paused: bool
) -> None:
    plain, interleaved = _taken_meanwhile(aws, config)
    with pytest.raises(NotFound, match="no schedule 'nightly'"):
        interleaved.set_paused("nightly", paused, owner="work")
    after = plain.get("nightly")
    assert (after.spec.lambda_, after.paused, after.version) == ("sleepy", False, 1)


def test_another_lambdas_schedule_is_not_found_by_a_lambdas_route(aws: Any, config: StackConfig) -> None:
    schedules = Schedules(DynamoTaskStore(aws.dynamodb, config), ItemStore(aws.dynamodb, config.table_name), config)
    schedules.put("hourly", _spec("sleepy"))
    for call in (
        lambda: schedules.get("hourly", owner="work"),
        lambda: schedules.delete("hourly", owner="work"),
        lambda: schedules.set_paused("hourly", True, owner="work"),
    ):
        with pytest.raises(NotFound, match="no schedule 'hourly'"):
            call()
    assert schedules.get("hourly", owner="sleepy").paused is False
    schedules.set_paused("hourly", True, owner="sleepy")
    schedules.delete("hourly", owner="sleepy")
    with pytest.raises(NotFound):
        schedules.get("hourly")
