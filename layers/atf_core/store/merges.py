"""The record of a debounced request merged into its key's waiting task (atf_core.debounce).

A request with an idempotency key names a task id (atf_core.tasks.task_id_for); when debounce merges it into
another task, no task gets that id, so an item there says which task took the request (and the request's
fingerprint), and a repeat answers with it. It is written in the same transaction as the merge, where no item
has the id, so two repeats racing leave one record. It carries a TTL: the task it names runs within the
lambda's max delay, and is kept retention_days after it ends.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from atf_core.config import StackConfig
from atf_core.definitions import Attr
from atf_core.lifecycle import Transition
from atf_core.store import codec, holders
from atf_core.store.base import Change, MergeRecord, TaskRef
from atf_core.store.table import Table, put_request

MERGED_INTO = "mi"  # the record's attribute: the id of the task the request was merged into


def read_record(table: Table, record_id: str) -> MergeRecord | None:
    found = codec.from_item(table.get(record_id) or {})
    if MERGED_INTO not in found or Attr.STATUS in found:
        return None
    return MergeRecord(record_id, found.get(Attr.FINGERPRINT, ""), found[MERGED_INTO])


def merge(
    table: Table, config: StackConfig, task: TaskRef, transition: Transition, change: Change, record: MergeRecord
) -> bool:
    """The transition's update and the record's put in one transaction; False: a condition failed."""
    update = holders.transition_entry(table, config, task, transition, change)
    item = _record_item(config, record, change.now)
    put = put_request(table.name, item, "attribute_not_exists(#id)", {"#id": Attr.ID})
    return table.transact([update, {"Put": put}]) is None


def _record_item(config: StackConfig, record: MergeRecord, now: datetime) -> dict[str, Any]:
    # the task it names runs within its max delay (a day at most), then is kept retention_days after it ends
    expires = now + timedelta(days=config.retention_days + 1)
    return {
        Attr.ID: {"S": record.id},
        Attr.FINGERPRINT: {"S": record.fingerprint},
        MERGED_INTO: {"S": record.task_id},
        Attr.EXPIRES: {"N": str(int(expires.timestamp()))},
    }
