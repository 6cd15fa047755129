"""A task entity built in memory, for tests of code that reads tasks without a store.

`Task` requires ten fields; a test names only the ones its case is about and takes the rest from here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from atf_core.schema import Task, TaskStatus

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def a_task(at: datetime = NOW, **fields: Any) -> Task:
    """Task "t1" of lambda "work" in collection "c", new, created and scheduled `at`. `fields` override any
    field by its Python name (`lambda_`, `status`, `attempt`, `claimed_at`, ...)."""
    defaults: dict[str, Any] = {
        "id": "t1",
        "lambda_": "work",
        "collection": "c",
        "priority": "normal",
        "payload": {},
        "status": TaskStatus.NEW,
        "attempt": 0,
        "max_attempts": 3,
        "scheduled_at": at,
        "created_at": at,
    }
    return Task(**{**defaults, **fields})
