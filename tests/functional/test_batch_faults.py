"""A batch whose writes have begun answers item by item: a transport fault on one item's write (a read
timeout, a closed connection, past botocore's retries) is that item's 503, and the others stand. It had
escaped the batch as the Lambda's error, a 502 for the whole request after the other items were written."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ReadTimeoutError

from atf_core.api import BatchRequest
from atf_core.config import StackConfig
from atf_core.schema import utcnow
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling, task_id_for
from functions.frontend.batch import schedule_batch


def test_a_transport_fault_on_one_items_write_is_that_items_503(aws: Any, config: StackConfig) -> None:
    # Given a batch of four tasks, and the task store timing out on the third one's write
    store = DynamoTaskStore(aws.dynamodb, config)
    batch = BatchRequest.model_validate({"tasks": [{"lambda": "work", "key": f"k{i}"} for i in range(4)]})
    real_create = store.create

    def create(task: Any, fingerprint: str) -> Any:
        if task.id == third_id:
            raise ReadTimeoutError(endpoint_url="http://dynamodb.invalid")
        return real_create(task, fingerprint)

    third_id = task_id_for("work", "k2")
    store.create = create  # type: ignore[method-assign]
    # When it is scheduled
    result = schedule_batch(Scheduling(store, config), config, batch, utcnow())
    # Then the third item is a 503 to retry, and the other three were written and say so
    assert [item.status for item in sorted(result.results, key=lambda i: i.index)] == [201, 201, 503, 201]
    failed = next(item for item in result.results if item.index == 2)
    assert failed.error is not None and failed.error.code == "unavailable"
    assert store.get(third_id) is None
