"""A transition carries what its write does (stamp, guards, index partition); the store builds the write
from that alone, so a transition it has never heard of by name is applied as declared."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from atf_core import lifecycle
from atf_core.config import StackConfig
from atf_core.definitions import Attr
from atf_core.lifecycle import Assoc, Expiry, IndexEffect, Transition
from atf_core.schema import TaskStatus, to_ms
from atf_core.store.base import Change, TaskRef
from atf_core.store.update import TransitionUpdate

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
REF = TaskRef("t1", "work", "normal")


def test_a_move_and_only_a_move_names_its_partition() -> None:
    with pytest.raises(ValueError, match="names the partition"):
        Transition("x", frozenset({TaskStatus.NEW}), TaskStatus.NEW, index=IndexEffect.MOVE)
    with pytest.raises(ValueError, match="names the partition"):
        Transition("x", frozenset({TaskStatus.NEW}), TaskStatus.NEW, moves_to=Assoc.NEW)
    moves = [t for t in lifecycle.TRANSITIONS if t.index is IndexEffect.MOVE]
    assert {t.moves_to for t in moves} == set(Assoc)


def test_an_unnamed_transition_stamps_guards_and_moves_as_it_declares(config: StackConfig) -> None:
    novel = Transition(
        "novel",
        frozenset({TaskStatus.NEW}),
        TaskStatus.CLAIMED,
        index=IndexEffect.MOVE,
        moves_to=Assoc.DEAD_LETTER,
        stamps=Attr.CLAIMED,
        expiry=Expiry.NOT_PASSED,
        fenced=False,
    )
    update = TransitionUpdate(config, REF, novel, Change(now=NOW, next_at=NOW)).build()
    assert f"#{Attr.CLAIMED} = :{Attr.CLAIMED}" in update.expression
    assert update.values[f":{Attr.CLAIMED}"] == {"N": str(to_ms(NOW))}
    assert update.values[":pk"]["S"].startswith("d#work#normal#")
    assert "(attribute_not_exists(#x) OR #x > :xnow)" in update.condition
    assert "#a = :attempt" not in update.condition  # not fenced


@pytest.mark.parametrize("transition", lifecycle.TRANSITIONS, ids=lambda t: t.name)
def test_each_transition_stamps_only_its_own_field(config: StackConfig, transition: Transition) -> None:
    change = Change(now=NOW, attempt=1, next_at=NOW)
    update = TransitionUpdate(config, REF, transition, change).build()
    stamps = {Attr.ENQUEUED, Attr.CLAIMED, Attr.HEARTBEAT}
    assert {a for a in stamps if f"#{a} = :{a}" in update.expression} == ({transition.stamps} & stamps)
    guarded = "#x > :xnow" in update.condition
    assert guarded is (transition.expiry is Expiry.NOT_PASSED)


def test_expire_applies_only_once_expire_at_has_passed_by_the_moment_named(config: StackConfig) -> None:
    update = TransitionUpdate(config, REF, lifecycle.EXPIRE, Change(now=NOW, expired_by=NOW)).build()
    assert "#x <= :xby" in update.condition and update.values[":xby"] == {"N": str(to_ms(NOW))}
