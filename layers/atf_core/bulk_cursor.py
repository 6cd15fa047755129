"""Where a bulk action goes on: the cursor of an answer that says `more`, passed back by the next call.

A cursor is its action's own, and a dry run's or a real run's (a dry run's cursor would have a real run skip
what the dry run only listed). It names the position, in the order the selection is read, of the last entry
the call reached: the next call reads strictly after it. A paced or placed action also carries its drip: its
base (a reschedule's run time, a reprioritise's first moment), its rate and how many drip slots its calls
used, so that a continued call drips on from there with the first call's run time and rate, whatever the
request repeats. A continued reschedule leaves out the tasks sitting on a slot it gave out: those are the
ones it moved (moved earlier than the rest, they would be the soonest and selected again and again); a task
that was there already is where the reschedule would put one anyway.

As text: unpadded urlsafe base64 of compact JSON, refused (InputError naming `cursor`) unless it is exactly
what `encode` writes.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from atf_core.deadletters import FOREVER
from atf_core.errors import InputError
from atf_core.schema import from_ms, to_ms
from atf_core.store.positions import Position

Action = Literal["cancel", "reschedule", "reprioritise"]
ACTIONS: tuple[Action, ...] = ("cancel", "reschedule", "reprioritise")
LAST_MS = to_ms(FOREVER)  # past any time a task can have
MOST_PER_SECOND = 1e6


@dataclass(frozen=True)
class Drip:
    """A drip's first time (epoch ms), its rate (None: all at the first time) and the slots used so far."""

    base_ms: int
    per_second: float | None
    used: int = 0

    def slot_ms(self, n: int) -> int:
        """When its n-th slot is (as dripped() gives it, to the millisecond the index keeps)."""
        return to_ms(from_ms(self.base_ms) + timedelta(seconds=n / self.per_second if self.per_second else 0))

    def gave_out(self, next_ms: int) -> bool:
        """Whether `next_ms` is one of the slots used so far."""
        if not self.used:
            return False
        if not self.per_second:
            return next_ms == self.base_ms
        nearest = round((next_ms - self.base_ms) * self.per_second / 1000)
        return any(0 <= n < self.used and self.slot_ms(n) == next_ms for n in (nearest - 1, nearest, nearest + 1))


@dataclass(frozen=True)
class Cursor:
    action: Action
    after: Position
    dry_run: bool
    drip: Drip | None = None

    def moved(self, next_ms: int) -> bool:
        """A reschedule's: whether a task at `next_ms` sits on a slot its earlier calls gave out."""
        return self.action == "reschedule" and self.drip is not None and self.drip.gave_out(next_ms)

    def encode(self) -> str:
        fields: dict[str, Any] = {"a": self.action, "p": list(self.after)}
        if self.dry_run:
            fields["d"] = 1
        if self.drip is not None:
            fields["b"], fields["u"] = self.drip.base_ms, self.drip.used
            if self.drip.per_second is not None:
                fields["r"] = self.drip.per_second
        text = json.dumps(fields, separators=(",", ":"), ensure_ascii=True)
        return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str | None, action: Action, dry_run: bool) -> Cursor | None:
        """The cursor an answer of `action` (a dry run, or not) gave, or InputError naming `cursor`: nothing is
        read or written then."""
        if text is None:
            return None
        cursor = _parsed(text)
        if cursor is None or cursor.encode() != text:  # only what encode writes: no padding, nothing else
            raise InputError("cursor is not one a bulk call answered: pass the last answer's cursor as it is", "cursor")
        if cursor.action != action:
            raise InputError(f"cursor is a {cursor.action}'s, not a {action}'s: start this one without it", "cursor")
        if cursor.dry_run != dry_run:
            said = "a dry run's goes on with a dry run" if cursor.dry_run else "a real run's goes on with a real run"
            raise InputError(f"cursor: {said}", "cursor")
        return cursor


def _parsed(text: str) -> Cursor | None:
    try:
        fields = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, binascii.Error, RecursionError):  # not base64, not UTF-8, not JSON (or nested past reading)
        return None
    if not isinstance(fields, dict) or fields.get("a") not in ACTIONS or fields.get("d", 0) not in (0, 1):
        return None
    after = fields.get("p")
    if not (isinstance(after, list) and len(after) == 2 and _whole(after[0]) and isinstance(after[1], str)):
        return None
    drip = _drip(fields)
    if drip is False or (drip is not None and fields["a"] == "cancel"):
        return None
    return Cursor(fields["a"], (after[0], after[1]), fields.get("d") == 1, drip or None)


def _drip(fields: dict[str, Any]) -> Drip | Literal[False] | None:
    """The cursor's drip; None where it has none, False where what it has is not a drip."""
    if "b" not in fields and "u" not in fields and "r" not in fields:
        return None
    base, used, rate = fields.get("b"), fields.get("u"), fields.get("r")
    if not (isinstance(base, int) and isinstance(used, int) and _whole(base) and _whole(used)):
        return False
    if rate is not None and not (_number(rate) and 0 < rate <= MOST_PER_SECOND):
        return False
    return Drip(base, rate, used)


def _whole(value: object) -> bool:
    """A JSON whole number a cursor may hold: a time (epoch ms) up to LAST_MS, a count."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= LAST_MS


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
