"""Table.batch_get asks again for the keys DynamoDB left unprocessed, only for those, after a wait that
grows: a batch read that a throttled table answered in part comes back whole, and does not hammer the
table while it is throttled."""

from __future__ import annotations

from typing import Any

from atf_core.backoff import ceiling
from atf_core.store.table import BATCH_GET_KEYS, UNPROCESSED_WAIT_BASE_S, UNPROCESSED_WAIT_CAP_S, Table

TABLE = "tasks"


class PartlyThrottled:
    """A BatchGetItem that answers `per_call` keys a call and leaves the rest unprocessed."""

    def __init__(self, per_call: int) -> None:
        self.per_call = per_call
        self.asked: list[list[str]] = []

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:  # noqa: N803 - boto3's name
        keys = RequestItems[TABLE]["Keys"]
        self.asked.append([key["id"]["S"] for key in keys])
        answered, left = keys[: self.per_call], keys[self.per_call :]
        reply: dict[str, Any] = {"Responses": {TABLE: [{"id": key["id"], "n": {"N": "1"}} for key in answered]}}
        if left:
            reply["UnprocessedKeys"] = {TABLE: {**RequestItems[TABLE], "Keys": left}}
        return reply


def _read(ids: list[str], per_call: int) -> tuple[list[str], PartlyThrottled, list[float]]:
    client, waits = PartlyThrottled(per_call), []
    table = Table(client, TABLE, sleep=waits.append)  # type: ignore[arg-type]
    got = [item["id"]["S"] for item in table.batch_get(ids, consistent=True)]
    return got, client, waits


def test_keys_left_unprocessed_are_asked_again_until_every_item_came() -> None:
    ids = [f"t{n}" for n in range(10)]

    got, client, _ = _read(ids, per_call=3)

    assert got == ids
    assert client.asked == [ids, ids[3:], ids[6:], ids[9:]]


def test_each_try_again_waits_within_a_ceiling_that_doubles() -> None:
    got, _, waits = _read([f"t{n}" for n in range(8)], per_call=1)

    assert len(got) == 8
    assert len(waits) == 7  # one before each of the seven tries again, none after the last answer
    for retry, wait in enumerate(waits, start=1):
        assert 0 <= wait <= ceiling(retry, UNPROCESSED_WAIT_BASE_S, UNPROCESSED_WAIT_CAP_S)
    assert sum(waits) > 0


def test_a_read_answered_whole_does_not_wait() -> None:
    ids = [f"t{n}" for n in range(BATCH_GET_KEYS + 5)]

    got, client, waits = _read(ids, per_call=BATCH_GET_KEYS)

    assert sorted(got) == sorted(ids)
    assert [len(asked) for asked in client.asked] == [BATCH_GET_KEYS, 5]
    assert waits == []
