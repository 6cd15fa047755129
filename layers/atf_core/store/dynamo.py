"""The task store on DynamoDB: one table, one sparse index, conditional writes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from atf_core import lifecycle
from atf_core.config import StackConfig
from atf_core.definitions import GATES_ITEM_ID, INDEX_NAME, Attr
from atf_core.lifecycle import IndexEffect, Transition
from atf_core.schema import Gate, Task, TaskStatus, to_ms
from atf_core.store import codec
from atf_core.store.base import Change, CreateResult, DueEntry, Outcome, TaskRef, TaskStore

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_STAMP = {
    lifecycle.ENQUEUE.name: Attr.ENQUEUED,
    lifecycle.REQUEUE.name: Attr.ENQUEUED,
    lifecycle.CLAIM.name: Attr.CLAIMED,
    lifecycle.HEARTBEAT.name: Attr.HEARTBEAT,
    lifecycle.HEARTBEAT_STAMP.name: Attr.HEARTBEAT,
}


class DynamoTaskStore(TaskStore):
    def __init__(self, client: DynamoDBClient, config: StackConfig) -> None:
        self._db = client
        self._config = config
        self._table = config.table_name

    # -- tasks ---------------------------------------------------------------
    def create(self, task: Task, fingerprint: str) -> CreateResult:
        shard = codec.shard_of(task.id, self._config.shards_of(task.lambda_))
        partition: str | None = codec.index_partition(codec.Assoc.NEW, task.lambda_, task.priority, shard)
        if task.status is TaskStatus.WAITING:
            partition = None  # a chain link enters the index when its parents succeed
        try:
            self._db.put_item(
                TableName=self._table,
                Item=codec.task_to_item(task, fingerprint, partition),
                ConditionExpression="attribute_not_exists(#id)",
                ExpressionAttributeNames={"#id": Attr.ID},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            old = _failed_condition_item(error)
            if old is None:
                raise
            existing = codec.item_to_task(old)
            same = codec.from_item(old).get(Attr.FINGERPRINT) == fingerprint
            return CreateResult(task=existing, created=False, conflict=not same)
        return CreateResult(task=task, created=True)

    def get(self, task_id: str) -> Task | None:
        item = self._db.get_item(TableName=self._table, Key={Attr.ID: {"S": task_id}}, ConsistentRead=True)
        found = item.get("Item")
        return codec.item_to_task(found) if found and Attr.STATUS in found else None

    def get_many(self, task_ids: Sequence[str], consistent: bool = True) -> list[Task]:
        tasks: list[Task] = []
        for start in range(0, len(task_ids), 100):
            keys: list[dict[str, Any]] = [{Attr.ID: {"S": i}} for i in dict.fromkeys(task_ids[start : start + 100])]
            request: dict[str, Any] = {self._table: {"Keys": keys, "ConsistentRead": consistent}}
            while request:
                reply = self._db.batch_get_item(RequestItems=request)
                tasks.extend(codec.item_to_task(i) for i in reply["Responses"].get(self._table, []))
                request = reply.get("UnprocessedKeys") or {}
        return tasks

    def transition(self, task: TaskRef, transition: Transition, change: Change) -> Outcome:
        expression = _UpdateBuilder(self._config, task, transition, change).build()
        try:
            reply = self._db.update_item(
                TableName=self._table,
                Key={Attr.ID: {"S": task.id}},
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **expression,
            )
        except ClientError as error:
            return _rejected(error, transition, change)
        return Outcome(applied=True, task=codec.item_to_task(reply["Attributes"]))

    def due(self, partition: str, up_to: datetime, skip_collections: Iterable[str] = ()) -> Iterator[DueEntry]:
        request: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": INDEX_NAME,
            "KeyConditionExpression": "#pk = :pk AND #sk <= :upto",
            "ExpressionAttributeNames": {"#pk": Attr.INDEX_PK, "#sk": Attr.INDEX_SK},
            "ExpressionAttributeValues": {":pk": {"S": partition}, ":upto": {"N": str(to_ms(up_to))}},
            "Limit": self._config.page_size,
        }
        skipped = sorted(set(skip_collections))
        if skipped:
            names = [f":c{i}" for i in range(len(skipped))]
            request["FilterExpression"] = f"NOT #c IN ({', '.join(names)})"
            request["ExpressionAttributeNames"]["#c"] = Attr.COLLECTION
            request["ExpressionAttributeValues"].update({n: {"S": c} for n, c in zip(names, skipped, strict=True)})
        while True:
            page = self._db.query(**request)
            # (An item that left the index as the query read it comes back without its key on moto's server.)
            for item in page.get("Items", []):
                if Attr.INDEX_SK in item:
                    yield codec.due_entry(item)
            if "LastEvaluatedKey" not in page:
                return
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def entries(
        self, partition: str, low: datetime, high: datetime, equal: dict[str, str] | None = None
    ) -> Iterator[DueEntry]:
        request: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": INDEX_NAME,
            "KeyConditionExpression": "#pk = :pk AND #sk BETWEEN :low AND :high",
            "ExpressionAttributeNames": {"#pk": Attr.INDEX_PK, "#sk": Attr.INDEX_SK},
            "ExpressionAttributeValues": {
                ":pk": {"S": partition},
                ":low": {"N": str(to_ms(low))},
                ":high": {"N": str(to_ms(high))},
            },
        }
        clauses = []
        for i, (attr, value) in enumerate(sorted((equal or {}).items())):
            request["ExpressionAttributeNames"][f"#f{i}"] = attr
            request["ExpressionAttributeValues"][f":f{i}"] = {"S": value}
            clauses.append(f"#f{i} = :f{i}")
        if clauses:
            request["FilterExpression"] = " AND ".join(clauses)
        while True:
            page = self._db.query(**request)
            yield from (codec.due_entry(item) for item in page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    # -- gates ---------------------------------------------------------------
    def gates(self) -> list[Gate]:
        item = self._db.get_item(TableName=self._table, Key={Attr.ID: {"S": GATES_ITEM_ID}}, ConsistentRead=True)
        stored = codec.from_item(item.get("Item", {})).get("g", {})
        return [codec.gate_from_plain(scope, raw) for scope, raw in sorted(stored.items())]

    def put_gate(self, gate: Gate) -> None:
        value = codec.to_attr(codec.gate_to_plain(gate))
        try:
            self._db.update_item(
                TableName=self._table,
                Key={Attr.ID: {"S": GATES_ITEM_ID}},
                UpdateExpression="SET g.#scope = :gate",
                ConditionExpression="attribute_exists(g)",
                ExpressionAttributeNames={"#scope": gate.scope},
                ExpressionAttributeValues={":gate": value},
            )
        except ClientError as error:
            if _code(error) != "ConditionalCheckFailedException":
                raise
            self._create_gates_item(gate.scope, value)

    def _create_gates_item(self, scope: str, value: dict[str, Any]) -> None:
        try:
            self._db.put_item(
                TableName=self._table,
                Item={Attr.ID: {"S": GATES_ITEM_ID}, "g": {"M": {scope: value}}},
                ConditionExpression="attribute_not_exists(g)",
            )
        except ClientError as error:
            if _code(error) != "ConditionalCheckFailedException":
                raise
            self.put_gate_raw(scope, value)  # another writer created it first

    def put_gate_raw(self, scope: str, value: dict[str, Any]) -> None:
        self._db.update_item(
            TableName=self._table,
            Key={Attr.ID: {"S": GATES_ITEM_ID}},
            UpdateExpression="SET g.#scope = :gate",
            ExpressionAttributeNames={"#scope": scope},
            ExpressionAttributeValues={":gate": value},
        )

    def delete_gate(self, lambda_name: str, collection: str | None) -> bool:
        scope = f"{lambda_name}/{collection or '*'}"
        try:
            self._db.update_item(
                TableName=self._table,
                Key={Attr.ID: {"S": GATES_ITEM_ID}},
                UpdateExpression="REMOVE g.#scope",
                ConditionExpression="attribute_exists(g.#scope)",
                ExpressionAttributeNames={"#scope": scope},
            )
        except ClientError as error:
            if _code(error) == "ConditionalCheckFailedException":
                return False
            raise
        return True


class _UpdateBuilder:
    """Builds the one conditional UpdateItem that applies a transition."""

    def __init__(self, config: StackConfig, task: TaskRef, transition: Transition, change: Change) -> None:
        self._config, self._task, self._t, self._c = config, task, transition, change
        self._names: dict[str, str] = {"#s": Attr.STATUS, "#w": Attr.WRITER}
        self._values: dict[str, Any] = {":target": {"S": transition.target.value}, ":w": {"S": change.writer}}
        self._sets = ["#s = :target", "#w = :w"]
        self._removes: list[str] = []

    def build(self) -> dict[str, Any]:
        self._stamp()
        self._index()
        self._details()
        update = "SET " + ", ".join(self._sets)
        if self._removes:
            update += " REMOVE " + ", ".join(self._removes)
        return {
            "UpdateExpression": update,
            "ConditionExpression": self._condition(),
            "ExpressionAttributeNames": self._names,
            "ExpressionAttributeValues": self._values,
        }

    def _set(self, attr: str, value: dict[str, Any]) -> None:
        self._names[f"#{attr}"] = attr
        self._values[f":{attr}"] = value
        self._sets.append(f"#{attr} = :{attr}")

    def _stamp(self) -> None:
        now = {"N": str(to_ms(self._c.now))}
        stamp = _STAMP.get(self._t.name)
        if stamp:
            self._set(stamp, now)
        if self._t.bumps_attempt:
            self._names["#a"] = Attr.ATTEMPT
            self._values[":one"] = {"N": "1"}
            self._sets.append("#a = #a + :one")
        if self._t.target.terminal:
            self._set(Attr.FINISHED, now)
            expires = self._c.now + timedelta(days=self._config.retention_days)
            self._set(Attr.EXPIRES, {"N": str(int(expires.timestamp()))})

    def _index(self) -> None:
        if self._t.index is not IndexEffect.KEEP:
            self._names["#pk"], self._names["#sk"] = Attr.INDEX_PK, Attr.INDEX_SK
        if self._t.index is IndexEffect.REMOVE:
            self._removes += ["#pk", "#sk"]
        elif self._t.index is IndexEffect.MOVE:
            if self._c.next_at is None:
                raise ValueError(f"{self._t.name} needs next_at")
            shard = codec.shard_of(self._task.id, self._config.shards_of(self._task.lambda_name))
            partition = codec.index_partition(self._t.assoc, self._task.lambda_name, self._task.priority, shard)
            self._values[":pk"] = {"S": partition}
            self._values[":sk"] = {"N": str(to_ms(self._c.next_at))}
            self._sets += ["#pk = :pk", "#sk = :sk"]

    def _details(self) -> None:
        error = self._c.error
        if error is not None:
            plain = codec.to_attr(codec.error_to_plain(error))
            self._set(Attr.ERROR, plain)
            self._names["#eh"] = Attr.ERRORS
            self._values[":eh"] = {"L": [plain]}
            self._values[":none"] = {"L": []}
            self._sets.append("#eh = list_append(if_not_exists(#eh, :none), :eh)")
            if self._t.target is TaskStatus.DEAD_LETTER:
                self._set(Attr.ERROR_TYPE, {"S": error.type})
        if self._c.host is not None:
            self._set(Attr.CLAIMED_BY, {"S": self._c.host[:200]})
        if self._c.reason is not None:
            self._set(Attr.REASON, {"S": self._c.reason[:500]})
        if self._c.max_attempts is not None:  # a fresh budget on top of the attempts used so far
            self._names["#m"], self._names["#a"] = Attr.MAX_ATTEMPTS, Attr.ATTEMPT
            self._values[":budget"] = {"N": str(self._c.max_attempts)}
            self._sets.append("#m = #a + :budget")

    def _condition(self) -> str:
        sources = sorted(s.value for s in self._t.sources)
        names = [f":from{i}" for i in range(len(sources))]
        self._values.update({n: {"S": s} for n, s in zip(names, sources, strict=True)})
        clauses = [f"#s IN ({', '.join(names)})"]
        if self._t.fenced:
            if self._c.attempt is None:
                raise ValueError(f"{self._t.name} is fenced: name the attempt")
            self._names["#a"] = Attr.ATTEMPT
            self._values[":attempt"] = {"N": str(self._c.attempt)}
            clauses.append("#a = :attempt")
        if self._c.due_by is not None:
            self._names["#sk"] = Attr.INDEX_SK
            self._values[":due"] = {"N": str(to_ms(self._c.due_by))}
            clauses.append("#sk <= :due")
        if self._c.entry_ms is not None:
            self._names["#sk"] = Attr.INDEX_SK
            self._values[":entry"] = {"N": str(self._c.entry_ms)}
            self._values[":recorded"] = {"S": TaskStatus.ENQUEUED.value}
            clauses.append("(#s = :recorded OR #sk <= :entry)")
        clauses += self._expiry_clauses()
        for attr, observed in sorted(self._c.observed.items()):
            self._names[f"#o_{attr}"] = attr
            self._values[f":o_{attr}"] = {"N": str(observed)}
            clauses.append(f"#o_{attr} = :o_{attr}")
        return " AND ".join(clauses)

    def _expiry_clauses(self) -> list[str]:
        """Claims and enqueues skip an expired task; EXPIRE applies only to one."""
        now = {"N": str(to_ms(self._c.now))}
        if self._t.name in (lifecycle.CLAIM.name, lifecycle.ENQUEUE.name):
            self._names["#x"] = Attr.EXPIRE_AT
            self._values[":xnow"] = now
            return ["(attribute_not_exists(#x) OR #x > :xnow)"]
        if self._c.expired_by is not None:
            self._names["#x"] = Attr.EXPIRE_AT
            self._values[":xby"] = {"N": str(to_ms(self._c.expired_by))}
            return ["#x <= :xby"]
        return []


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _failed_condition_item(error: ClientError) -> dict[str, Any] | None:
    if _code(error) != "ConditionalCheckFailedException":
        return None
    item: dict[str, Any] | None = error.response.get("Item")  # type: ignore[assignment]
    return item or None


def _rejected(error: ClientError, transition: Transition, change: Change) -> Outcome:
    if _code(error) != "ConditionalCheckFailedException":
        raise error
    old = _failed_condition_item(error)
    if old is None or Attr.STATUS not in old:
        return Outcome(applied=False, task=None)
    task = codec.item_to_task(old)
    ours = codec.from_item(old).get(Attr.WRITER) == change.writer
    if ours and task.status is transition.target:
        return Outcome(applied=True, task=task, reconciled=True)
    return Outcome(applied=False, task=task)
