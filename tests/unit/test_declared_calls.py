"""Each store and queue method declares the AWS actions it calls (atf_core.calls), and the declaration
is what the method really calls: every method runs against in-process moto, every path that makes
a call of its own, while a botocore hook records the operations sent. A declaration that names an
action the method does not call, or misses one it does, fails here; so does a method without one."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore import xform_name

import atf_core.store
from atf_core import lifecycle, queues
from atf_core.calls import AUTHORIZED_AS, actions_of, authorized_as, calls, declarations, declared
from atf_core.config import StackConfig
from atf_core.definitions import Attr
from atf_core.lifecycle import Assoc
from atf_core.queues import QueueDirectory, TaskMessage
from atf_core.schema import Gate, GateAction, ScheduleRequest, Task, to_ms
from atf_core.store.base import Change, MergeRecord, TaskRef
from atf_core.store.codec import index_partition, shard_of
from atf_core.store.counters import Counters
from atf_core.store.index import IndexStore
from atf_core.store.items import ItemStore
from atf_core.store.scan import TaskScan
from atf_core.store.table import Table
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import build_task
from atf_sdk.worker.buffers import Buffered, Received
from atf_sdk.worker.controller import Controller, ControllerSettings
from atf_sdk.worker.deletes import DeleteBatcher
from tests.functional.helpers import T0

ROOT = Path(__file__).resolve().parents[2]


class World:
    """Every store on one embedded AWS, and the actions its clients were asked to make."""

    def __init__(self, clients: Any, config: StackConfig) -> None:
        self.config = config
        self.called: set[str] = set()
        self.recording = False
        for client in (clients.dynamodb, clients.sqs):
            client.meta.events.register("before-call.*.*", self._record)
        clients.dynamodb.meta.events.register("before-parameter-build.dynamodb.TransactWriteItems", self._entries)
        table = config.table_name
        self.tasks = DynamoTaskStore(clients.dynamodb, config)
        self.index = IndexStore(clients.dynamodb, table, config.page_size)
        self.items = ItemStore(clients.dynamodb, table)
        self.counters = Counters(clients.dynamodb, table)
        self.scan = TaskScan(clients.dynamodb, table)
        self.sqs = clients.sqs
        self.batchers: list[DeleteBatcher] = []  # each runs a thread until closed

    def _record(self, model: Any, **_: Any) -> None:
        if self.recording and model.name != "TransactWriteItems":
            self.called.add(authorized_as(model.service_model.signing_name, model.name))

    def _entries(self, params: dict[str, Any], **_: Any) -> None:
        """AWS authorizes a transaction entry by entry, each under its own action (a Put as PutItem...)."""
        if self.recording:
            self.called |= {f"dynamodb:{kind}Item" for entry in params["TransactItems"] for kind in entry}

    def actions(self, call: Callable[[], object]) -> set[str]:
        """The actions one call makes (an iterator it returns is read to the end)."""
        self.called, self.recording = set(), True
        try:
            result = call()
            if isinstance(result, Iterator):
                list(result)
        finally:
            self.recording = False
        return self.called

    def task(self, **request: Any) -> Task:
        req = ScheduleRequest.model_validate({"lambda": "work", **request})
        return self.tasks.create(build_task(self.config, req, T0), req.fingerprint()).task

    def built(self, **request: Any) -> Task:
        """A task as the frontend builds it, not written."""
        return build_task(self.config, ScheduleRequest.model_validate({"lambda": "work", **request}), T0)

    def partition(self, task: Task, assoc: Assoc = Assoc.NEW) -> str:
        shard = shard_of(task.id, self.config.shards_of(task.lambda_))
        return index_partition(assoc, task.lambda_, task.priority, shard)

    def queues(self) -> QueueDirectory:
        return QueueDirectory(self.sqs, self.config)  # a new one: no queue URL cached yet

    def controller(self) -> Controller:
        """A worker host's controller for lambda "work", the gates it reads already read: what it calls on
        the store is the store's to declare (its parts name the store's methods), what it calls on SQS its own."""
        controller = Controller(
            self.tasks, self.sqs, self.sqs, self.config, ["work"], ControllerSettings(1, prefetch_per_lambda=None)
        )
        controller._gate_view()
        self.batchers.append(controller._deletes)
        return controller

    def batcher(self) -> DeleteBatcher:
        self.batchers.append(DeleteBatcher(self.sqs))
        return self.batchers[-1]

    def received(self) -> Received:
        """A message of lambda "work" received from its queue (so it has a receipt)."""
        queues = self.queues()
        queues.send("work", "normal", [TaskMessage("t", 0, 0, "c")])
        url = queues.url("work", "normal")
        (message,) = self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"]
        return Received(TaskMessage.decode(message["Body"]), url, message["ReceiptHandle"])


def _gate() -> Gate:
    return Gate(lambda_="work", collection=None, action=GateAction.PAUSE, reason="r", created_at=T0)


def _nothing(w: World) -> None:
    return None


REDRIVE = Change(T0, next_at=T0, max_attempts=3)


def _task(w: World) -> Task:
    return w.task()


def _gated(w: World) -> None:
    w.tasks.put_gate(_gate())


def _slots(w: World) -> None:
    w.counters.open_slots("work")


def _slot_held(w: World) -> None:
    _slots(w)
    w.counters.take_slot("work", "t", 5, max_running=1, expires=9)


def _item(w: World) -> None:
    w.items.put("#i", {"f": 1}, None, None)


# A scenario: a setup (not recorded), then the call whose actions are recorded, given what the setup returned.
Scenario = tuple[Callable[[World], Any], Callable[[World, Any], object]]

# Every declared method, with calls that take it down each path that makes a call of its own.
SCENARIOS: dict[tuple[type, str], list[Scenario]] = {
    (DynamoTaskStore, "create"): [
        (_nothing, lambda w, _: w.task()),
        (_task, lambda w, task: w.tasks.create(task, "another request")),  # refused: the id exists
    ],
    (DynamoTaskStore, "get"): [(_task, lambda w, task: w.tasks.get(task.id))],
    (DynamoTaskStore, "key_holder"): [(_nothing, lambda w, _: w.tasks.key_holder("work", "k"))],
    (DynamoTaskStore, "create_holding"): [
        (_nothing, lambda w, _: w.tasks.create_holding(w.built(flow_key="k"), "f", None, None)),
        (_task, lambda w, task: w.tasks.create_holding(w.built(flow_key="k"), "f", None, task)),
    ],
    (DynamoTaskStore, "merge_record"): [(_task, lambda w, task: w.tasks.merge_record(task.id))],
    (DynamoTaskStore, "merge"): [
        (
            _task,
            lambda w, task: w.tasks.merge(
                TaskRef.of(task),
                lifecycle.AMEND,
                Change(now=T0, attempt=0, next_at=T0),
                MergeRecord("merged-request", "f", task.id),
            ),
        )
    ],
    (DynamoTaskStore, "redrive_holding"): [
        (_task, lambda w, task: w.tasks.redrive_holding(TaskRef(task.id, "work", task.priority, "k"), REDRIVE, None))
    ],
    (DynamoTaskStore, "get_many"): [(_task, lambda w, task: w.tasks.get_many([task.id, "absent"]))],
    (DynamoTaskStore, "transition"): [
        (_task, lambda w, task: w.tasks.transition(TaskRef.of(task), lifecycle.ENQUEUE, Change(now=T0))),
        (_task, lambda w, task: w.tasks.transition(TaskRef.of(task), lifecycle.SUCCEED, Change(now=T0, attempt=1))),
    ],
    (DynamoTaskStore, "due"): [(_task, lambda w, task: w.tasks.due(w.partition(task), T0, ["paused"]))],
    (DynamoTaskStore, "read_past"): [
        (_task, lambda w, task: w.tasks.read_past(w.partition(task), T0, [("default", "k")], ["paused"], since_ms=0))
    ],
    (DynamoTaskStore, "entries"): [
        (_task, lambda w, task: w.tasks.entries(w.partition(task), T0, T0, {Attr.COLLECTION: "c"}))
    ],
    (DynamoTaskStore, "gates"): [(_gated, lambda w, _: w.tasks.gates())],
    (DynamoTaskStore, "put_gate"): [
        (_nothing, lambda w, _: w.tasks.put_gate(_gate())),  # the first gate creates the gates item
        (_gated, lambda w, _: w.tasks.put_gate(_gate())),
    ],
    (DynamoTaskStore, "delete_gate"): [
        (_nothing, lambda w, _: w.tasks.delete_gate("work", None)),
        (_gated, lambda w, _: w.tasks.delete_gate("work", None)),
    ],
    (IndexStore, "due"): [(_task, lambda w, task: w.index.due(w.partition(task), T0))],
    (IndexStore, "read_past"): [(_task, lambda w, task: w.index.read_past(w.partition(task), T0, [("default", "k")]))],
    (IndexStore, "entries"): [(_task, lambda w, task: w.index.entries(w.partition(task), T0, T0))],
    (IndexStore, "ids"): [(_task, lambda w, task: w.index.ids(w.partition(task), to_ms(T0)))],
    (IndexStore, "count"): [(_task, lambda w, task: w.index.count(w.partition(task), 0, None, max_pages=2))],
    (IndexStore, "oldest"): [(_task, lambda w, task: w.index.oldest(w.partition(task), None, limit=5))],
    (ItemStore, "put"): [
        (_nothing, lambda w, _: w.items.put("#i", {"f": 1}, ("cron", 5), None)),
        (_item, lambda w, _: w.items.put("#i", {"f": 2}, None, 1)),
        (_item, lambda w, _: w.items.put("#i", {"f": 2}, None, None)),  # refused: it exists
    ],
    (ItemStore, "get"): [(_item, lambda w, _: w.items.get("#i")), (_nothing, lambda w, _: w.items.get("#i"))],
    (ItemStore, "get_many"): [(_item, lambda w, _: w.items.get_many(["#i", "#absent"], ("v",)))],
    (ItemStore, "delete"): [(_item, lambda w, _: w.items.delete("#i")), (_nothing, lambda w, _: w.items.delete("#i"))],
    (ItemStore, "partition"): [(_nothing, lambda w, _: w.items.partition("cron", to_ms(T0)))],
    (Counters, "take_start"): [(_nothing, lambda w, _: w.counters.take_start("work", 100, allowed=1, expires=4000))],
    (Counters, "give_back_start"): [
        (
            lambda w: w.counters.take_start("work", 100, allowed=1, expires=4000),
            lambda w, _: w.counters.give_back_start("work", 100),
        ),
    ],
    (Counters, "open_slots"): [(_nothing, lambda w, _: w.counters.open_slots("work"))],
    (Counters, "take_slot"): [
        (_slots, lambda w, _: w.counters.take_slot("work", "t", 5, max_running=1, expires=9)),
        (_slot_held, lambda w, _: w.counters.take_slot("work", "t", 6, max_running=1, expires=9)),  # renewed
    ],
    (Counters, "renew_slot"): [(_nothing, lambda w, _: w.counters.renew_slot("work", "t", 6, 9))],
    (Counters, "slots"): [(_nothing, lambda w, _: w.counters.slots("work"))],
    (Counters, "free_slot"): [
        (_slots, lambda w, _: w.counters.free_slot("work", "t")),
        (_slots, lambda w, _: w.counters.free_slot("work", "t", lease_ms=5)),
    ],
    (TaskScan, "tasks"): [(_task, lambda w, _: w.scan.tasks(limit=10))],
    (QueueDirectory, "url"): [(_nothing, lambda w, _: w.queues().url("work", "normal"))],
    (QueueDirectory, "depth"): [(_nothing, lambda w, _: w.queues().depth("work", "normal"))],
    (QueueDirectory, "send"): [
        (_nothing, lambda w, _: w.queues().send("work", "normal", [TaskMessage("t", 0, 0, "c")])),
    ],
}
STORE_CLASSES = sorted({cls for cls, _ in SCENARIOS}, key=lambda c: c.__name__)


def _controller_with_message(w: World) -> Controller:
    w.queues().send("work", "normal", [TaskMessage("t", 0, 0, "c")])
    return w.controller()


def _delete_and_flush(w: World, given: tuple[Controller, Received]) -> None:
    controller, received = given
    controller._delete(Buffered(0, 0, 0, received.message, received.queue_url, received.receipt))
    controller._deletes.close()  # sends what waits


# The worker host's own SQS calls, made by the controller and its delete batcher (in the background, on
# eviction from a full buffer and on drain, each through these methods).
SCENARIOS.update(
    {
        (Controller, "queue_url"): [(lambda w: w.controller(), lambda w, c: c.queue_url("work", "normal"))],
        (Controller, "_receive_once"): [
            (_controller_with_message, lambda w, c: c._receive_once("work", "normal", 0)),
            (lambda w: w.controller(), lambda w, c: c._receive_once("work", "normal", 0)),  # nothing waits
        ],
        (Controller, "_release"): [(lambda w: (w.controller(), w.received()), lambda w, g: g[0]._release([g[1]]))],
        (Controller, "_delete"): [(lambda w: (w.controller(), w.received()), _delete_and_flush)],
        (DeleteBatcher, "_send"): [
            (lambda w: w.received(), lambda w, r: w.batcher()._send(r.queue_url, [r.receipt])),
        ],
    }
)


@pytest.fixture
def world(aws: Any, config: StackConfig) -> Iterator[World]:
    world = World(aws, config)
    yield world
    for batcher in world.batchers:
        batcher.close()


@pytest.mark.parametrize(("cls", "method"), list(SCENARIOS), ids=[f"{c.__name__}.{m}" for c, m in SCENARIOS])
def test_a_declaration_names_exactly_the_actions_its_method_calls(world: World, cls: type, method: str) -> None:
    called: set[str] = set()
    for setup, call in SCENARIOS[cls, method]:
        given = setup(world)
        called |= world.actions(lambda: call(world, given))  # noqa: B023 (called at once)
    assert called == declared(getattr(cls, method))


def test_every_class_given_a_client_declares_each_public_method() -> None:
    """A class of the store or the queues that is given a boto3 client calls AWS, so each of its public
    methods says what it calls; but Table, the door the stores share (components are built from stores)."""
    given_a_client = set()
    for module in _store_modules():
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__ or cls is Table:
                continue
            if any("Client" in str(p.annotation) for p in inspect.signature(cls.__init__).parameters.values()):
                given_a_client.add(cls)
    assert given_a_client == set(STORE_CLASSES)
    for cls in STORE_CLASSES:
        public = {name for name, _ in inspect.getmembers(cls, inspect.isfunction) if not name.startswith("_")}
        assert set(declarations(cls)) == public, f"{cls.__name__}: a public method without @calls"
        assert {m for c, m in SCENARIOS if c is cls} == public, f"{cls.__name__}: a method without scenarios"


def test_a_class_needs_the_union_of_its_methods_actions() -> None:
    assert actions_of(QueueDirectory) == {"sqs:GetQueueUrl", "sqs:GetQueueAttributes", "sqs:SendMessage"}
    assert actions_of(Counters) == {"dynamodb:UpdateItem", "dynamodb:GetItem"}
    reads = {"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"}
    assert actions_of(DynamoTaskStore) == reads | {"dynamodb:PutItem", "dynamodb:UpdateItem"}


def test_the_worker_hosts_own_sqs_calls_are_declared_as_iam_authorizes_them() -> None:
    releases = {"sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueUrl"}
    assert actions_of(Controller) == releases | {"sqs:DeleteMessage"}
    assert actions_of(DeleteBatcher) == {"sqs:DeleteMessage"}  # sent as DeleteMessageBatch


def test_a_part_is_a_class_or_one_declared_method() -> None:
    assert actions_of(QueueDirectory.url, Counters.slots) == {"sqs:GetQueueUrl", "dynamodb:GetItem"}
    assert actions_of(QueueDirectory.depth) == {"sqs:GetQueueAttributes", "sqs:GetQueueUrl"}
    with pytest.raises(ValueError, match="declares no calls"):
        actions_of(World.queues)


def test_a_declaration_must_name_an_iam_action_or_a_declared_method() -> None:
    with pytest.raises(ValueError, match="IAM action"):
        calls("Query")
    with pytest.raises(ValueError, match="declares no calls"):
        calls(test_a_class_needs_the_union_of_its_methods_actions)
    with pytest.raises(ValueError, match="authorized as 'sqs:SendMessage'"):
        calls("sqs:SendMessageBatch")
    assert authorized_as("sqs", "DeleteMessageBatch") == "sqs:DeleteMessage"
    assert not [a for a in AUTHORIZED_AS.values() if a.endswith("Batch")]


# DynamoDB's item operations as boto3 names them: outside atf_core/store, no shipped module may call one.
DATA_PLANE = {
    "get_item",
    "put_item",
    "update_item",
    "delete_item",
    "query",
    "scan",
    "batch_get_item",
    "batch_write_item",
    "transact_get_items",
    "transact_write_items",
    "execute_statement",
    "batch_execute_statement",
    "execute_transaction",
}
SHIPPED = ("layers/atf_core", "sdk/atf_sdk", "functions", "local/atf_local")
# The cost meter reads the table to price the writes it meters: an instrument, wherever it lives. The embedded
# AWS's transaction journal calls moto's own Table methods of those names, inside moto: no call to DynamoDB.
INSTRUMENTS = {"billing.py", "transaction_journal.py"}


def test_only_the_store_calls_dynamodb() -> None:
    found = []
    for path in sorted(p for root in SHIPPED for p in (ROOT / root).rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith("layers/atf_core/store/") or path.name in INSTRUMENTS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in DATA_PLANE:
                found.append(f"{relative}:{node.lineno} {node.func.attr}")
    assert found == []


# What the components (the functions, the worker hosts) run: their every AWS call is declared, so their
# roles can be derived (atf_cdk.grants). The CLI runs under its user's credentials; the local stack and the
# test kit are harnesses.
COMPONENT_CODE = ("layers/atf_core", "sdk/atf_sdk/worker", "functions")
SERVICES = ("dynamodb", "sqs", "cloudwatch", "logs", "sts", "kms", "iam")
# Table, the door the stores share: each store method that goes through it is declared (and run above).
TABLE_DOOR = ROOT / "layers/atf_core/store/table.py"


def test_every_aws_call_a_component_makes_is_in_a_declared_method() -> None:
    """An operation of a boto3 client (by its snake_case name) called outside a method with @calls would
    make a call its role was never given: CloudWatch's PutMetricData among them (metrics go out as EMF)."""
    session = botocore.session.get_session()
    operations = {
        xform_name(name) for service in SERVICES for name in session.get_service_model(service).operation_names
    }
    found = []
    for path in sorted(p for root in COMPONENT_CODE for p in (ROOT / root).rglob("*.py")):
        if path.name in INSTRUMENTS or path == TABLE_DOOR:
            continue
        for function in ast.walk(ast.parse(path.read_text())):
            if not isinstance(function, ast.FunctionDef) or _declares(function):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in operations:
                    found.append(f"{path.relative_to(ROOT).as_posix()}:{node.lineno} {node.func.attr}")
    assert found == []


def test_the_frontends_iam_calls_are_declared_as_made(aws: Any) -> None:
    """ItemAccess (atf_core.item_access) against in-process moto's IAM, given the simulation the local stack
    serves: reading a session's role calls iam:GetRole, the check iam:SimulatePrincipalPolicy."""
    import boto3

    from atf_core.item_access import ItemAccess
    from atf_local.iam.simulate import serve_simulation

    serve_simulation()
    iam = boto3.client("iam", region_name="us-east-1")
    role = iam.create_role(RoleName="team", Path="/teams/", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    called: set[str] = set()
    iam.meta.events.register("before-call.*.*", lambda model, **_: called.add(f"iam:{model.name}"))
    access = ItemAccess(iam)
    assert access.source_arn("arn:aws:sts::123456789012:assumed-role/team/s") == role
    assert called == declared(ItemAccess.source_arn)
    called.clear()
    access.decisions(role, ["arn:aws:execute-api:us-east-1:123456789012:a/s/POST/v1/lambdas/x/chains"])
    assert called == declared(ItemAccess.decisions)
    assert "iam:SimulatePrincipalPolicy" in actions_of(ItemAccess)


def _declares(function: ast.FunctionDef) -> bool:
    decorators = function.decorator_list
    return any(isinstance(d, ast.Call) and isinstance(d.func, ast.Name) and d.func.id == "calls" for d in decorators)


def _store_modules() -> Iterator[Any]:
    yield queues
    for info in pkgutil.iter_modules(atf_core.store.__path__):
        yield importlib.import_module(f"atf_core.store.{info.name}")
