"""Bill AWS calls by the documented rules, from a botocore event hook.

moto's ConsumedCapacity is not AWS's, so the meter computes units itself:
- DynamoDB writes: 1 unit per KB (rounded up) of the larger of the item before
  and after; failed conditional writes are billed on the item as it stands.
- Index writes: +1 to add an entry, +2 to change its key, +1 to remove it,
  +1 to change a projected attribute, 0 otherwise.
- Reads: 1 unit per 4 KB strongly consistent, half that eventually consistent
  (index queries always are); a query is rounded up once over what it read.
- SQS: one request per call per 64 KB of payload.

To know the item before a write, the meter reads it first with an unmetered
client: a measuring device, not something to run in production paths.
Without a reader it can still count calls and SQS requests (bill_writes=False),
which is how the benchmarks meter whole processes under load.

Prices (us-east-1, on-demand; /work/shared/reference/aws-facts.md) live here
and nowhere else, with the peers' list prices the cost report compares with.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from atf_core.definitions import INDEX_PROJECTION, Attr

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

KB = 1024
INDEX_KEYS = (Attr.INDEX_PK, Attr.INDEX_SK)
# The quantities a Bill holds (priced per million by Price; index units are part of write_units).
METERED = ("write_units", "read_units", "sqs_requests")


class Price:
    """List prices in dollars (us-east-1, on-demand), per million unless named otherwise."""

    DYNAMODB_WRITE_UNITS = 0.625
    DYNAMODB_READ_UNITS = 0.125
    SQS_REQUESTS = 0.40
    API_GATEWAY_REST = 3.50
    LAMBDA_REQUESTS = 0.20
    LAMBDA_GB_SECOND_X86 = 0.0000166667  # per GB-second, not per million
    LAMBDA_GB_SECOND_ARM = 0.0000133334
    FARGATE_VCPU_HOUR = 0.04048  # per vCPU-hour, x86
    FARGATE_GB_HOUR = 0.004445  # per GB-hour
    EVENTBRIDGE_SCHEDULER = 1.00
    STEP_FUNCTIONS_STANDARD_TRANSITIONS = 25.0
    CLOUD_TASKS_OPERATIONS = 0.40


@dataclass(frozen=True)
class PeerCost:
    name: str
    dollars_per_million: float
    basis: str


def peer_costs() -> list[PeerCost]:
    """What a million one-shot delayed tasks cost on the peers, by their published prices."""
    return [
        PeerCost(
            "EventBridge Scheduler",
            Price.EVENTBRIDGE_SCHEDULER + Price.SQS_REQUESTS,
            "one at() schedule per task ($1.00/M) + its SQS send ($0.40/M)",
        ),
        PeerCost(
            "Step Functions Standard",
            4 * Price.STEP_FUNCTIONS_STANDARD_TRANSITIONS,
            "about 4 state transitions per task at $25/M",
        ),
        PeerCost("Google Cloud Tasks", 2 * Price.CLOUD_TASKS_OPERATIONS, "create + one push, $0.40/M operations each"),
    ]


def lambda_dollars(gb_seconds: float, invocations: float, arm: bool = False) -> float:
    per_gb_s = Price.LAMBDA_GB_SECOND_ARM if arm else Price.LAMBDA_GB_SECOND_X86
    return gb_seconds * per_gb_s + invocations * Price.LAMBDA_REQUESTS / 1e6


def attribute_size(value: dict[str, Any]) -> int:
    """Size of one typed attribute value, per the DynamoDB developer guide."""
    kind, inner = next(iter(value.items()))
    if kind == "S":
        return len(str(inner).encode())
    if kind == "N":
        digits = len(str(Decimal(str(inner)).normalize()).replace("-", "").replace(".", "").lstrip("0")) or 1
        return math.ceil(digits / 2) + 1
    if kind == "B":
        return len(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return 3 + sum(len(k.encode()) + attribute_size(v) + 1 for k, v in inner.items())
    if kind == "L":
        return 3 + sum(attribute_size(v) + 1 for v in inner)
    if kind in ("SS", "NS", "BS"):
        return sum(attribute_size({kind[0]: v}) for v in inner)
    raise ValueError(f"unknown attribute type {kind}")


def item_size(item: dict[str, Any] | None) -> int:
    if not item:
        return 0
    return sum(len(name.encode()) + attribute_size(value) for name, value in item.items())


def write_units(before: dict[str, Any] | None, after: dict[str, Any] | None) -> int:
    return max(1, math.ceil(max(item_size(before), item_size(after)) / KB))


def index_write_units(before: dict[str, Any] | None, after: dict[str, Any] | None) -> int:
    had = bool(before) and all(k in before for k in INDEX_KEYS)  # type: ignore[operator]
    has = bool(after) and all(k in after for k in INDEX_KEYS)  # type: ignore[operator]
    if had and has:
        assert before is not None and after is not None
        if any(before[k] != after[k] for k in INDEX_KEYS):
            return 2
        return 1 if any(before.get(a) != after.get(a) for a in INDEX_PROJECTION) else 0
    return int(had) + int(has)


@dataclass
class Bill:
    write_units: float = 0.0
    read_units: float = 0.0
    sqs_requests: int = 0
    calls: Counter[str] = field(default_factory=Counter)
    # "<service>.<call>/<quantity>": what each kind of call cost (index_units is part of write_units)
    detail: dict[str, float] = field(default_factory=dict)

    def per_task(self, tasks: int) -> dict[str, float]:
        return {k: getattr(self, k) / max(1, tasks) for k in METERED}

    def __add__(self, other: Bill) -> Bill:
        return Bill(
            self.write_units + other.write_units,
            self.read_units + other.read_units,
            self.sqs_requests + other.sqs_requests,
            self.calls + other.calls,
            _combine(self.detail, other.detail, 1),
        )

    def __sub__(self, other: Bill) -> Bill:
        calls = Counter(self.calls)
        calls.subtract(other.calls)
        return Bill(
            self.write_units - other.write_units,
            self.read_units - other.read_units,
            self.sqs_requests - other.sqs_requests,
            +calls,
            _combine(self.detail, other.detail, -1),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "write_units": self.write_units,
            "read_units": self.read_units,
            "sqs_requests": self.sqs_requests,
            "calls": dict(self.calls),
            "detail": dict(self.detail),
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Bill:
        calls, detail = Counter(raw.get("calls", {})), dict(raw.get("detail", {}))
        return cls(raw["write_units"], raw["read_units"], raw["sqs_requests"], calls, detail)


def _combine(a: dict[str, float], b: dict[str, float], sign: int) -> dict[str, float]:
    keys = set(a) | set(b)
    combined = {k: a.get(k, 0.0) + sign * b.get(k, 0.0) for k in keys}
    return {k: v for k, v in combined.items() if v}


class CostMeter:
    """Attach to clients with `meter.attach(client)`; read `meter.bill`."""

    def __init__(self, reader: DynamoDBClient | None = None, *, bill_writes: bool = True) -> None:
        self._reader = reader  # unmetered client used to see items before writes
        self._bill_writes = bill_writes  # without a reader, an update's units are unknown
        self.bill = Bill()
        self._lock = threading.Lock()
        self._local = threading.local()

    def attach(self, client: Any) -> None:
        events = client.meta.events
        events.register("before-parameter-build", self._before)
        events.register("after-call", self._after)

    def snapshot(self) -> Bill:
        with self._lock:
            return self.bill + Bill()

    def _before(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self._local.params = params
        self._local.before = None
        if model.name in WRITES and self._reader is not None:
            self._local.before = self._read(params)
        if model.name == TRANSACT and self._reader is not None:
            self._local.before = [self._read(next(iter(e.values()))) for e in params["TransactItems"]]

    def _read(self, write: dict[str, Any]) -> dict[str, Any] | None:
        """The item a write (or a transaction's entry) is about, as it stands, read unmetered."""
        assert self._reader is not None
        key = write.get("Key") or {Attr.ID: write["Item"][Attr.ID]}
        return self._reader.get_item(TableName=write["TableName"], Key=key, ConsistentRead=True).get("Item")

    def _after(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        service = model.service_model.service_name
        failed = "Error" in parsed and bool(parsed["Error"].get("Code"))
        params = getattr(self._local, "params", {})
        call = f"{service}.{model.name}"
        with self._lock:
            self.bill.calls[f"{call}{'!' if failed else ''}"] += 1
            if service == "sqs":
                self._add(call, "sqs_requests", max(1, math.ceil(_sqs_payload(params) / (64 * KB))))
            elif model.name in WRITES and self._bill_writes:
                item_units, index_units = self._write_cost(model.name, parsed, failed, params)
                self._add(call, "write_units", item_units + index_units)
                self._add(call, "index_units", index_units)
            elif model.name == TRANSACT and self._bill_writes and not failed:
                item_units, index_units = self._transaction_cost(params)
                self._add(call, "write_units", item_units + index_units)
                self._add(call, "index_units", index_units)
            elif model.name in READS:
                self._add(call, "read_units", _read_units(model.name, parsed, params))

    def _add(self, call: str, quantity: str, amount: float) -> None:
        if quantity in METERED:
            setattr(self.bill, quantity, getattr(self.bill, quantity) + amount)
        key = f"{call}/{quantity}"
        self.bill.detail[key] = self.bill.detail.get(key, 0.0) + amount

    def _write_cost(self, name: str, parsed: dict[str, Any], failed: bool, params: dict[str, Any]) -> tuple[int, int]:
        """(item units, index units) of one write."""
        before = getattr(self._local, "before", None)
        if failed:
            conditional = parsed["Error"].get("Code") == "ConditionalCheckFailedException"
            return (write_units(before, None) if conditional else 0), 0
        after = {"PutItem": params.get("Item"), "DeleteItem": None}.get(name, parsed.get("Attributes"))
        return write_units(before, after), index_write_units(before, after)

    def _transaction_cost(self, params: dict[str, Any]) -> tuple[int, int]:
        """(item units, index units) of a written transaction: each item's units twice (a transactional
        write's price), its index's once. A cancelled one is billed nothing here (AWS bills its reads)."""
        befores = getattr(self._local, "before", None) or [None] * len(params["TransactItems"])
        items = index = 0
        for entry, before in zip(params["TransactItems"], befores, strict=True):
            after = self._read(next(iter(entry.values()))) if self._reader is not None else None
            items += 2 * write_units(before, after)
            index += index_write_units(before, after)
        return items, index


WRITES = ("UpdateItem", "PutItem", "DeleteItem")
TRANSACT = "TransactWriteItems"
READS = ("GetItem", "BatchGetItem", "Query")


def _sqs_payload(params: dict[str, Any]) -> int:
    bodies = [params.get("MessageBody", "")] + [e.get("MessageBody", "") for e in params.get("Entries", [])]
    return sum(len(str(b).encode()) for b in bodies)


def _read_units(name: str, parsed: dict[str, Any], params: dict[str, Any]) -> float:
    if name == "GetItem":
        units = max(1, math.ceil(item_size(parsed.get("Item")) / (4 * KB)))
        return units if params.get("ConsistentRead") else units / 2
    if name == "BatchGetItem":
        batch = 0.0
        for table, items in parsed.get("Responses", {}).items():
            consistent = params.get("RequestItems", {}).get(table, {}).get("ConsistentRead", False)
            full = sum(max(1, math.ceil(item_size(i) / (4 * KB))) for i in items)
            batch += full if consistent else full / 2
        return batch
    read = sum(item_size(i) for i in parsed.get("Items", []))
    return max(1, math.ceil(read / (4 * KB))) / 2
