"""The limiter's counters in the task table: starts per time window, and the running slots of a scope.

A window is an item per (scope, window start) whose count grows up to the
allowed starts (and shrinks again only for a start another scope then refused),
and expires an hour after the window. A scope's running
slots are one item holding a map of task id -> lease end (epoch ms); a
start adds its task while the map is smaller than the cap. Every take and
renewal of a slot pushes the item's TTL past its lease, so the item of a scope
nobody uses (a flow key gone quiet) leaves the table by itself.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

from atf_core.calls import calls
from atf_core.definitions import Attr
from atf_core.store.table import Table

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class SlotTake(StrEnum):
    """What asking for a running slot found."""

    TAKEN = "taken"  # the task holds a slot it did not hold before
    HELD = "held"  # it held one already (its lease now renewed): a duplicate message, a re-claim of a lost attempt
    FULL = "full"  # the scope runs its cap of other tasks


class Counters:
    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._table = Table(client, table)

    @calls("dynamodb:UpdateItem")
    def take_start(self, scope: str, window_start: int, allowed: int, expires: int) -> bool:
        """Count one start in the window beginning at `window_start` (epoch s), if fewer than `allowed` were."""
        return self._table.update(
            f"#rate#{scope}#{window_start}",
            "ADD n :one SET #ttl = :ttl",
            "attribute_not_exists(n) OR n < :limit",
            {"#ttl": Attr.EXPIRES},
            {":one": {"N": "1"}, ":limit": {"N": str(allowed)}, ":ttl": {"N": str(expires)}},
        ).applied

    @calls("dynamodb:UpdateItem")
    def give_back_start(self, scope: str, window_start: int) -> None:
        """Uncount a start counted in the window beginning at `window_start`: the task did not start."""
        self._table.update(
            f"#rate#{scope}#{window_start}",
            "ADD n :less",
            "n > :none",
            values={":less": {"N": "-1"}, ":none": {"N": "0"}},
        )

    @calls("dynamodb:UpdateItem")
    def open_slots(self, scope: str) -> None:
        """Make sure the scope's map of running slots exists."""
        self._table.update(_slots(scope), "SET r = if_not_exists(r, :empty)", values={":empty": {"M": {}}})

    @calls("dynamodb:UpdateItem")
    def take_slot(self, scope: str, task_id: str, lease_ms: int, max_running: int, expires: int) -> SlotTake:
        """Hold a slot for the task until `lease_ms`, if fewer than `max_running` are held, or renew the one it
        holds; the item lives until `expires` (epoch s) at least. Which of the two it was matters to whoever
        gives slots back when the start does not happen: only a slot this take added is theirs to give."""
        taken = self._table.update(
            _slots(scope),
            "SET r.#t = :exp, #ttl = :ttl",
            "size(r) < :max AND attribute_not_exists(r.#t)",
            {"#t": task_id, "#ttl": Attr.EXPIRES},
            {":exp": {"N": str(lease_ms)}, ":max": {"N": str(max_running)}, ":ttl": {"N": str(expires)}},
            old_on_refusal=True,
        )
        if taken.applied:
            return SlotTake.TAKEN
        held = task_id in (taken.item or {}).get("r", {}).get("M", {})
        return SlotTake.HELD if held and self.renew_slot(scope, task_id, lease_ms, expires) else SlotTake.FULL

    @calls("dynamodb:UpdateItem")
    def renew_slot(self, scope: str, task_id: str, lease_ms: int, expires: int) -> bool:
        """Extend the lease of a slot the task still holds (and the item's life, to `expires`)."""
        names = {"#t": task_id, "#ttl": Attr.EXPIRES}
        values = {":exp": {"N": str(lease_ms)}, ":ttl": {"N": str(expires)}}
        update = "SET r.#t = :exp, #ttl = :ttl"
        return self._table.update(_slots(scope), update, "attribute_exists(r.#t)", names, values).applied

    @calls("dynamodb:GetItem")
    def slots(self, scope: str) -> dict[str, int]:
        """The slots held in a scope: task id -> lease end (epoch ms)."""
        found = self._table.get(_slots(scope)) or {}
        return {task_id: int(lease["N"]) for task_id, lease in found.get("r", {}).get("M", {}).items()}

    @calls("dynamodb:UpdateItem")
    def free_slot(self, scope: str, task_id: str, lease_ms: int | None = None) -> bool:
        """Give the task's slot back; with `lease_ms`, only if its lease is still that one (a reclaim)."""
        if lease_ms is None:
            return self._table.update(_slots(scope), "REMOVE r.#t", names={"#t": task_id}).applied
        values = {":exp": {"N": str(lease_ms)}}
        return self._table.update(_slots(scope), "REMOVE r.#t", "r.#t = :exp", {"#t": task_id}, values).applied


def _slots(scope: str) -> str:
    return f"#running#{scope}"
