"""Gates: pause or drop a lambda, or one collection of it.

At what moment a gate applies (GateView.decide's `at`) differs by who asks, on purpose:
- the consumer, at the task's run time: a drop ends a task for good, so it must be the gate in force when the
  task is due, not when a poll read it ahead (a gate may lift by its until in between), nor one that lifted
  since a task was due that no poll had looked at yet;
- a worker host's controller, at the claim's moment: the task is due by then, and a pause that has ended
  must not hand the task back again (judged at its due time it would, at every delivery).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property

from atf_core import lifecycle
from atf_core.config import StackConfig
from atf_core.errors import InputError, NotFound
from atf_core.schema import Gate, GateAction, gate_scope, utcnow
from atf_core.store.base import Change, TaskRef, TaskStore


@dataclass(frozen=True)
class GateView:
    """The gates in force at one moment, ready for quick look-ups; and those stored that had lifted by their
    until then (a put removes them later), for a task due before they lifted."""

    gates: tuple[Gate, ...]
    now: datetime
    lifted: tuple[Gate, ...] = ()

    @classmethod
    def of(cls, gates: list[Gate], now: datetime) -> GateView:
        in_force = tuple(g for g in gates if g.active(now))
        return cls(in_force, now, tuple(g for g in gates if not g.active(now)))

    def decide(self, lambda_name: str, collection: str, at: datetime | None = None) -> Gate | None:
        """The gate that applies to a task at `at` (default: when the view was read): of the gates read, those
        in force at that moment, by their until (one that lifts later, one that had lifted since); drop wins
        over pause, collection over lambda."""
        moment = self.now if at is None else at
        found = [
            g for g in self._by_lambda.get(lambda_name, ()) if g.collection in (None, collection) and g.active(moment)
        ]
        if not found:
            return None
        return min(found, key=lambda g: (g.action is not GateAction.DROP, g.collection is None))

    @cached_property
    def _by_lambda(self) -> dict[str, list[Gate]]:
        """Every gate read, in force or lifted, by its lambda: the consumer decides once per index entry of a
        poll, and the lifted gates stay until a put removes them."""
        by_lambda: dict[str, list[Gate]] = defaultdict(list)
        for gate in (*self.gates, *self.lifted):
            by_lambda[gate.lambda_].append(gate)
        return dict(by_lambda)

    def lambda_paused(self, lambda_name: str) -> bool:
        return any(
            g.lambda_ == lambda_name and g.collection is None and g.action is GateAction.PAUSE for g in self.gates
        )

    def paused_collections(self, lambda_name: str) -> set[str]:
        return {
            g.collection
            for g in self.gates
            if g.lambda_ == lambda_name and g.collection is not None and g.action is GateAction.PAUSE
        }


class Gating:
    def __init__(self, store: TaskStore, config: StackConfig) -> None:
        self._store = store
        self._config = config

    def set(
        self, lambda_name: str, collection: str | None, action: GateAction, until: datetime | None, reason: str = ""
    ) -> Gate:
        self._config.lambda_named(lambda_name)  # UnknownLambda if there is none
        now = utcnow()
        if until is not None and until <= now:
            raise InputError("until is in the past", "until")
        gate = Gate(
            lambda_=lambda_name, collection=collection, action=action, until=until, reason=reason, created_at=now
        )
        self._store.put_gate(gate)
        return gate

    def lift(self, lambda_name: str, collection: str | None) -> None:
        if not self._store.delete_gate(lambda_name, collection):
            field = "lambda" if collection is None else "collection"  # the part of the scope that has no gate
            raise NotFound(f"no gate on {gate_scope(lambda_name, collection)}", field)

    def gates(self) -> list[Gate]:
        """Every gate stored, in force or past its until (view() keeps those in force)."""
        return self._store.gates()

    def view(self, now: datetime | None = None) -> GateView:
        return GateView.of(self._store.gates(), now or utcnow())


def hand_back(store: TaskStore, config: StackConfig, ref: TaskRef, attempt: int, now: datetime) -> None:
    """A controller received a task its gate now pauses, and deletes the message.

    A task the consumer sent without writing is still waiting in the index: the consumer
    sends it again once the gate lifts, and nothing needs writing. One recorded as
    enqueued goes back to new, its entry moved to now so the consumer sees it at once.
    (A re-enqueued stuck task is recorded in either mode; without a consumer that records,
    it waits for its enqueue timeout instead, a rare and bounded delay.)
    """
    if config.record_enqueued:
        store.transition(ref, lifecycle.RELEASE, Change(now=now, attempt=attempt, next_at=now))
