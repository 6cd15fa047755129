"""The one conditional UpdateItem that applies a transition, built from what the transition declares.

Everything the write does comes from the transition (lifecycle.Transition)
and the change: the stamp it sets, the index partition it moves the entry to,
the states it starts from, whether it is fenced by the attempt, what it asks
of expire_at. Nothing here knows a transition by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from atf_core.config import StackConfig
from atf_core.definitions import Attr
from atf_core.lifecycle import Expiry, IndexEffect, Transition
from atf_core.schema import MAX_KEPT_ERRORS, TaskStatus, to_ms
from atf_core.store import codec
from atf_core.store.base import Change, TaskRef


@dataclass(frozen=True)
class Update:
    expression: str
    condition: str
    names: dict[str, str]
    values: dict[str, Any]


class TransitionUpdate:
    def __init__(self, config: StackConfig, task: TaskRef, transition: Transition, change: Change) -> None:
        self._config, self._task, self._t, self._c = config, task, transition, change
        self._names: dict[str, str] = {"#s": Attr.STATUS, "#w": Attr.WRITER}
        self._values: dict[str, Any] = {":target": {"S": transition.target.value}, ":w": {"S": change.writer}}
        self._sets = ["#s = :target", "#w = :w"]
        self._removes: list[str] = []

    def build(self) -> Update:
        self._stamp()
        self._index()
        self._details()
        update = "SET " + ", ".join(self._sets)
        if self._removes:
            update += " REMOVE " + ", ".join(self._removes)
        return Update(update, self._condition(), self._names, self._values)

    def _set(self, attr: str, value: dict[str, Any]) -> None:
        self._names[f"#{attr}"] = attr
        self._values[f":{attr}"] = value
        self._sets.append(f"#{attr} = :{attr}")

    def _stamp(self) -> None:
        now = {"N": str(to_ms(self._c.now))}
        if self._t.stamps is not None:
            self._set(self._t.stamps, now)
        if self._t.stamps_once is not None:
            self._names["#once"] = self._t.stamps_once
            self._values[":now"] = now
            self._sets.append("#once = if_not_exists(#once, :now)")
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
        elif self._t.moves_to is not None:
            if self._c.next_at is None:
                raise ValueError(f"{self._t.name} needs next_at")
            shard = codec.shard_of(self._task.id, self._config.shards_of(self._task.lambda_name), self._task.flow_key)
            priority = self._c.priority or self._task.priority
            partition = codec.index_partition(self._t.moves_to, self._task.lambda_name, priority, shard)
            self._values[":pk"] = {"S": partition}
            self._values[":sk"] = {"N": str(to_ms(self._c.next_at))}
            self._sets += ["#pk = :pk", "#sk = :sk"]

    def _error(self) -> None:
        error = self._c.error
        if error is None:
            return
        kept = codec.error_to_plain(error)
        plain = codec.to_attr(kept)
        self._set(Attr.ERROR, plain)
        if error.attempt <= MAX_KEPT_ERRORS:  # past them, the latest alone: the item stays within 400 KB
            self._names["#eh"] = Attr.ERRORS
            self._values[":eh"] = {"L": [plain]}
            self._values[":none"] = {"L": []}
            self._sets.append("#eh = list_append(if_not_exists(#eh, :none), :eh)")
        if self._t.target is TaskStatus.DEAD_LETTER:
            self._set(Attr.ERROR_TYPE, {"S": kept["t"]})  # as last_error says it

    def _details(self) -> None:
        self._error()
        if self._c.host is not None:
            self._set(Attr.CLAIMED_BY, {"S": self._c.host[:200]})
        if self._c.result is not None:
            self._set(Attr.RESULT, {"S": self._c.result})
        if self._c.priority is not None:
            self._set(Attr.PRIORITY, {"S": self._c.priority})
        if self._c.payload is not None:
            self._set(Attr.PAYLOAD, {"S": self._c.payload})
        if self._c.scheduled_at is not None:
            self._set(Attr.SCHEDULED, {"N": str(to_ms(self._c.scheduled_at))})
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
            clauses += ["#sk <= :due", self._of_its_priority()]
        if self._c.entry_ms is not None:
            self._names["#sk"] = Attr.INDEX_SK
            self._values[":entry"] = {"N": str(self._c.entry_ms)}
            self._values[":recorded"] = {"S": TaskStatus.ENQUEUED.value}
            clauses += ["(#s = :recorded OR #sk <= :entry)", self._of_its_priority()]
        if self._t.moves_to is not None and self._c.priority is None and "#p" not in self._names:
            # The entry goes to the partition of the priority the caller read: if the task's has changed since
            # (an operator's change, landed between another's read and write), that entry would send it to a
            # queue whose every claim of it is refused, for ever. Refused here instead.
            clauses.append(self._of_its_priority())
        if self._c.seen_status is not None:
            self._values[":seen"] = {"S": self._c.seen_status.value}
            clauses.append("#s = :seen")
        clauses += self._expiry_clauses()
        for attr, observed in sorted(self._c.observed.items()):
            self._names[f"#o_{attr}"] = attr
            self._values[f":o_{attr}"] = {"N": str(observed)}
            clauses.append(f"#o_{attr} = :o_{attr}")
        return " AND ".join(clauses)

    def _of_its_priority(self) -> str:
        """The enqueue and the claim apply only to a task still of the priority whose entry or queue they came
        from: after a change of priority, an entry or a message left in the old one's does nothing (the task's
        new entry sends it; an enqueue from the old entry would hold it enqueued, its message refused)."""
        self._names["#p"] = Attr.PRIORITY
        self._values[":its_p"] = {"S": self._task.priority}
        return "#p = :its_p"

    def _expiry_clauses(self) -> list[str]:
        if self._t.expiry is Expiry.NOT_PASSED:
            self._names["#x"] = Attr.EXPIRE_AT
            self._values[":xnow"] = {"N": str(to_ms(self._c.now))}
            return ["(attribute_not_exists(#x) OR #x > :xnow)"]
        if self._t.expiry is Expiry.PASSED and self._c.expired_by is not None:
            self._names["#x"] = Attr.EXPIRE_AT
            self._values[":xby"] = {"N": str(to_ms(self._c.expired_by))}
            return ["#x <= :xby"]
        return []
