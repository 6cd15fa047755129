"""Every task in the table, for the local tools that can afford a scan of a small table.

The local console counts every task in every state and the fault harness
snapshots the table after a scenario; nothing deployed scans (the API's
statistics read the index), so no deployed component is built from this.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING

from atf_core.calls import calls
from atf_core.definitions import Attr
from atf_core.schema import Task
from atf_core.store import codec
from atf_core.store.table import Expression, Table

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# Task items only: the gates, schedules, chains and limiter counters share the table.
_TASKS = Expression("attribute_exists(#s) AND attribute_exists(#sa)", {"#s": Attr.STATUS, "#sa": Attr.SCHEDULED}, {})


@dataclass(frozen=True)
class Scanned:
    task: Task
    indexed: bool  # it has an entry in the scheduling index


class TaskScan:
    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._table = Table(client, table)

    @calls("dynamodb:Scan")
    def tasks(self, limit: int | None = None) -> Iterator[Scanned]:
        """Every task as last written (up to `limit`), in no particular order."""
        pages = self._table.scan(_TASKS)
        found = (
            Scanned(codec.item_to_task(item), Attr.INDEX_PK in item) for page in pages for item in page.get("Items", [])
        )
        return islice(found, limit)
