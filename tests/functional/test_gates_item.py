"""The gates item stays within what DynamoDB takes (400 KB) and what each consumer poll should read: a put
drops the gates past their until, and refuses one that would take the gates in force over their budget,
naming the field, with nothing changed (moto refuses an item over 400 KB, as DynamoDB does)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from atf_core.config import StackConfig
from atf_core.errors import Conflict
from atf_core.schema import Gate, GateAction
from atf_core.store.gates import MAX_GATES_BYTES
from atf_core.store.tasks import DynamoTaskStore
from tests.functional.helpers import gates_written_at_once

T = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
LONGEST_REASON = "é" * 500  # the API's 500 characters, 2 bytes each


def _gate(collection: str | None, at: datetime = T, until: datetime | None = None, reason: str = "") -> Gate:
    return Gate(
        lambda_="work", collection=collection, action=GateAction.PAUSE, until=until, reason=reason, created_at=at
    )


@pytest.fixture
def store(aws: Any, config: StackConfig) -> DynamoTaskStore:
    return DynamoTaskStore(aws.dynamodb, config)  # type: ignore[attr-defined]


# Short of the budget by some of the largest gates (~1 KB each): the puts that reach it go through put_gate
NEARLY_FULL = MAX_GATES_BYTES // 1100 - 8


def test_gates_fill_their_budget_and_the_next_is_refused_naming_its_field(
    aws: Any, config: StackConfig, store: DynamoTaskStore
) -> None:
    longest = [_gate(f"c{n:04}", reason=LONGEST_REASON) for n in range(NEARLY_FULL)]
    stored = gates_written_at_once(aws.dynamodb, config, longest)
    with pytest.raises(Conflict) as refused:
        while stored < 1000:  # far past the budget had every gate been taken
            store.put_gate(_gate(f"c{stored:04}", reason=LONGEST_REASON))
            stored += 1

    assert MAX_GATES_BYTES // 1100 <= stored < MAX_GATES_BYTES // 1000, "each gate takes ~1 KB"
    assert stored > NEARLY_FULL, "the budget was reached by put_gate"
    assert (refused.value.status, refused.value.field) == (409, "collection") and "lift some" in refused.value.message
    assert len(store.gates()) == stored, "the refused one changed nothing"
    # a lambda's own gate is refused too, naming the lambda; replacing a gate in force still works
    with pytest.raises(Conflict) as on_the_lambda:
        store.put_gate(_gate(None, reason=LONGEST_REASON))
    assert on_the_lambda.value.field == "lambda"
    store.put_gate(_gate("c0000", reason="shorter"))
    assert {g.collection: g.reason for g in store.gates()}["c0000"] == "shorter"


def test_a_put_drops_the_gates_past_their_until(store: DynamoTaskStore) -> None:
    store.put_gate(_gate("brief", until=T + timedelta(seconds=5)))
    store.put_gate(_gate("lasting"))
    assert {g.collection for g in store.gates()} == {"brief", "lasting"}, "still stored before it ends"

    store.put_gate(_gate("later", at=T + timedelta(seconds=10)))

    assert {g.collection for g in store.gates()} == {"lasting", "later"}


def test_past_gates_make_room_for_new_ones(aws: Any, config: StackConfig, store: DynamoTaskStore) -> None:
    passing = [_gate(f"c{n:04}", until=T + timedelta(seconds=1), reason=LONGEST_REASON) for n in range(NEARLY_FULL)]
    n = gates_written_at_once(aws.dynamodb, config, passing)
    with pytest.raises(Conflict):
        while n < 1000:
            store.put_gate(_gate(f"c{n:04}", until=T + timedelta(seconds=1), reason=LONGEST_REASON))
            n += 1

    # once they have passed they leave room at once, and each put removes up to 100 of them
    assert 200 < n <= 300
    for k in range(3):
        store.put_gate(_gate(f"new{k}", at=T + timedelta(seconds=2), reason=LONGEST_REASON))
        assert len(store.gates()) == max(n - 100 * (k + 1), 0) + k + 1
    assert {g.collection for g in store.gates()} == {"new0", "new1", "new2"}
