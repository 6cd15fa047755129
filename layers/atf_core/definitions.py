"""The table and queues, defined once.

The local stack creates them from these definitions with boto3, and the CDK
app builds its constructs from the same ones, so the two cannot drift.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from atf_core.config import StackConfig


class Attr:
    """Short attribute names: DynamoDB bills by item size, names included."""

    ID = "id"
    INDEX_PK = "gs"  # "<assoc>#<lambda>#<priority>#<shard>"
    INDEX_SK = "nt"  # next_timestamp, epoch milliseconds
    LAMBDA = "l"
    COLLECTION = "c"
    PRIORITY = "p"
    PAYLOAD = "d"
    STATUS = "s"
    ATTEMPT = "a"
    MAX_ATTEMPTS = "m"
    SCHEDULED = "sa"
    CREATED = "cr"
    ENQUEUED = "ea"
    CLAIMED = "ca"
    CLAIMED_BY = "cb"  # the executor (host:pid) the last claim was for
    FIRST_CLAIMED = "fc"  # the first claim: how late the task started, whatever its retries did since
    HEARTBEAT = "ha"
    FINISHED = "fa"
    ERROR = "e"
    REASON = "r"
    KEY = "k"
    FLOW_KEY = "fk"  # the flow-control key (limits per key, fairness between keys)
    FINGERPRINT = "f"
    WRITER = "w"  # token of the last transition, to recognise our own lost-response retries
    EXPIRES = "ttl"  # when DynamoDB may delete a finished task (retention)
    EXPIRE_AT = "x"  # when a task that has not started ends as expired
    ERRORS = "eh"  # every failed attempt's error
    ERROR_TYPE = "et"  # the last error's class, for filtering dead letters
    CHAIN = "ch"
    TIMEOUT = "to"  # the task's own time limit per attempt, in seconds
    RESULT = "rs"  # what the successful attempt returned, as compact JSON
    TRACEPARENT = "tp"
    REPLACED = "rp"  # the task this one replaced as its singleton flow key's holder, for a repeated request


INDEX_NAME = "due"
# Attributes copied into the index never change after creation (the error
# type changes only as a task enters the dead letters, when its key moves
# anyway), so no transition pays an extra index write for them.
INDEX_PROJECTION = (Attr.LAMBDA, Attr.COLLECTION, Attr.PRIORITY, Attr.EXPIRE_AT, Attr.ERROR_TYPE, Attr.FLOW_KEY)
GATES_ITEM_ID = "#gates"


@dataclass(frozen=True)
class QueueSpec:
    name: str
    dead_letter_name: str
    lambda_name: str
    priority: str
    part: int
    visibility_timeout_s: int
    retention_s: int
    max_receive_count: int
    # Dead letters are kept as long as SQS allows, so someone has time to look at them.
    dead_letter_retention_s: int = 14 * 24 * 3600

    @property
    def label(self) -> str:
        """lambda-priority, with the part where a priority is split (the first part keeps the plain label, so
        a stack that splits later keeps its resources' names)."""
        base = f"{self.lambda_name}-{self.priority}"
        return base if self.part == 0 else f"{base}-{self.part}"


@dataclass(frozen=True)
class TableSpec:
    name: str
    partition_key: str
    index_name: str
    index_partition_key: str
    index_sort_key: str
    index_projection: tuple[str, ...]
    ttl_attribute: str


def table_spec(config: StackConfig) -> TableSpec:
    return TableSpec(
        name=config.table_name,
        partition_key=Attr.ID,
        index_name=INDEX_NAME,
        index_partition_key=Attr.INDEX_PK,
        index_sort_key=Attr.INDEX_SK,
        index_projection=INDEX_PROJECTION,
        ttl_attribute=Attr.EXPIRES,
    )


def create_table_request(config: StackConfig) -> dict[str, Any]:
    """CreateTable arguments for boto3 (the local stack and tests)."""
    spec = table_spec(config)
    return {
        "TableName": spec.name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [
            {"AttributeName": spec.partition_key, "AttributeType": "S"},
            {"AttributeName": spec.index_partition_key, "AttributeType": "S"},
            {"AttributeName": spec.index_sort_key, "AttributeType": "N"},
        ],
        "KeySchema": [{"AttributeName": spec.partition_key, "KeyType": "HASH"}],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": spec.index_name,
                "KeySchema": [
                    {"AttributeName": spec.index_partition_key, "KeyType": "HASH"},
                    {"AttributeName": spec.index_sort_key, "KeyType": "RANGE"},
                ],
                "Projection": {
                    "ProjectionType": "INCLUDE",
                    "NonKeyAttributes": list(spec.index_projection),
                },
            }
        ],
    }


def queue_name(config: StackConfig, lambda_name: str, priority: str, part: int = 0) -> str:
    """A (lambda, priority)'s queue; a priority split over several queues (config.queue_parts_of) keeps the
    first one's name, so a stack that splits later keeps its queue and its messages."""
    base = f"{config.name}-{lambda_name}-{priority}"
    return base if part == 0 else f"{base}-{part}"


def queue_specs(config: StackConfig) -> list[QueueSpec]:
    # Messages are deleted right after the claim, so visibility only has to
    # cover a controller's local buffer; the task store, not SQS, is the
    # durable record.
    specs = []
    for lambda_name, spec in config.lambdas.items():
        for priority, part in itertools.product(spec.priorities, range(config.queue_parts_of(lambda_name))):
            name = queue_name(config, lambda_name, priority, part)
            specs.append(
                QueueSpec(
                    name=name,
                    dead_letter_name=f"{name}-dlq",
                    lambda_name=lambda_name,
                    priority=priority,
                    part=part,
                    visibility_timeout_s=60,
                    retention_s=4 * 24 * 3600,
                    max_receive_count=10,
                )
            )
    return specs
