"""The gates item: one item holding every gate, a map of scope -> gate, read whole by each consumer poll and
controller refresh.

DynamoDB refuses an item over 400 KB, and a gate may carry a 500-character reason: a few hundred gates
would fill the item, after which no gate could be set. So a put reads the item, drops the gates past their
`until` (nothing else removes them), refuses a gate that would take the rest over MAX_GATES_BYTES, and
writes on the version it read: a put racing another reads again.
"""

from __future__ import annotations

import json
from typing import Any

from atf_core.definitions import GATES_ITEM_ID, Attr
from atf_core.errors import Conflict
from atf_core.schema import Gate, to_ms
from atf_core.store import codec
from atf_core.store.table import Table

MAX_GATES_BYTES = 256 * 1024  # counted as UTF-8 JSON, near DynamoDB's own count, well within its 400 KB
WRITE_TRIES = 5
DROPPED_AT_ONCE = 100  # past gates removed by one write: its expression stays small
GATES = "g"
VERSION = "v"


def stored_gates(table: Table) -> list[Gate]:
    stored = codec.from_item(table.get(GATES_ITEM_ID) or {}).get(GATES, {})
    return [codec.gate_from_plain(scope, raw) for scope, raw in sorted(stored.items())]


def put_gate(table: Table, gate: Gate) -> None:
    """Set the gate (replacing its scope's), dropping gates past their until; Conflict when the gates in
    force would take more than MAX_GATES_BYTES, or kept changing while this one was written."""
    field = "lambda" if gate.collection is None else "collection"
    value = codec.gate_to_plain(gate)
    now_ms = to_ms(gate.created_at)
    for _ in range(WRITE_TRIES):
        raw = codec.from_item(table.get(GATES_ITEM_ID) or {})
        others = {scope: plain for scope, plain in raw.get(GATES, {}).items() if scope != gate.scope}
        past = [scope for scope, plain in others.items() if "u" in plain and plain["u"] <= now_ms]
        size = sum(gate_bytes(scope, plain) for scope, plain in others.items() if scope not in past)
        if size + gate_bytes(gate.scope, value) > MAX_GATES_BYTES:
            raise Conflict(
                f"the gates in force take {size} bytes, and this one would take them over {MAX_GATES_BYTES}: "
                "lift some first, or give shorter reasons",
                field,
            )
        if _write(table, gate.scope, value, past[:DROPPED_AT_ONCE], raw):
            return
    raise Conflict("the gates kept changing while this one was written; retry", field)


def delete_gate(table: Table, scope: str) -> bool:
    names = {"#scope": scope}
    return table.update(GATES_ITEM_ID, f"REMOVE {GATES}.#scope", f"attribute_exists({GATES}.#scope)", names).applied


def gate_bytes(scope: str, plain: dict[str, Any]) -> int:
    """What a gate takes of the budget: its scope and its stored fields as UTF-8 JSON."""
    return len(scope.encode()) + len(json.dumps(plain, ensure_ascii=False).encode())


def gates_item(stored: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The gates item, at its first version, holding `stored` (scope -> the gate as codec.gate_to_plain gives it)."""
    gates = {scope: codec.to_attr(plain) for scope, plain in stored.items()}
    return {Attr.ID: {"S": GATES_ITEM_ID}, GATES: {"M": gates}, VERSION: {"N": "1"}}


def _write(table: Table, scope: str, value: dict[str, Any], past: list[str], raw: dict[str, Any]) -> bool:
    """The gate set and the past ones removed, if the item is still the one read."""
    if GATES not in raw:
        return table.put(gates_item({scope: value}), condition=f"attribute_not_exists({GATES})").applied
    names = {"#scope": scope, "#v": VERSION, **{f"#p{n}": gone for n, gone in enumerate(past)}}
    values: dict[str, Any] = {":gate": codec.to_attr(value), ":zero": {"N": "0"}, ":one": {"N": "1"}}
    update = f"SET {GATES}.#scope = :gate, #v = if_not_exists(#v, :zero) + :one"
    if past:
        update += " REMOVE " + ", ".join(f"{GATES}.#p{n}" for n in range(len(past)))
    if VERSION in raw:
        values[":v"] = {"N": str(raw[VERSION])}
        condition = "#v = :v"
    else:  # written before gates had a version
        condition = "attribute_not_exists(#v)"
    return table.update(GATES_ITEM_ID, update, condition, names, values).applied
