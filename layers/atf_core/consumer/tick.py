"""How long one consumer invocation polls.

EventBridge ticks each consumer group once a minute; one invocation polls every poll_interval and stops just
before the next tick, so its execution environment is idle when that tick comes and Lambda hands the next
invocation to it, with this one's in-flight tracker. An invocation still polling at the tick would send the
next one to another environment, whose tracker is a minute or more old: it would send again every task sent
meanwhile that no worker had claimed yet (harmless, the claim is fenced, but a duplicate message each). The
last polls read further ahead to cover the hand-over: what falls due before the next invocation's first poll
is sent by this one, and the workers hold it until it is due. A late or lost tick leaves a gap, as before;
a duplicated one means two consumers for a while, which the conditional writes make harmless.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

TICK_S = 60  # EventBridge's rate(1 minute)
TICK_FIELD = "tick"  # the invocation's input field the rule's target fills with the event's time
# What an invocation leaves of its Lambda timeout: its last poll's end, the metrics' flush, its return.
LOOP_MARGIN_S = 2.0
# An invocation has returned this long before its next tick, so that tick finds its environment idle.
END_BEFORE_TICK_S = 0.5
# How late the next invocation's first poll may come after its tick (EventBridge's delivery, a cold start)
# with the tasks due meanwhile still sent on time.
NEXT_START_ALLOWANCE_S = 2.0


def consumer_timeout_s(poll_interval: float) -> int:
    """The consumer function's timeout: a little over the tick, so an invocation that does not know its tick
    (one invoked by hand) also polls up to the next one; one that does stops before."""
    return TICK_S + math.ceil(LOOP_MARGIN_S) + math.ceil(poll_interval) + 2


# How long after an invocation's time is up the next one's first poll may come: the rest of the tick, then its
# delivery and start. The last poll reads that far ahead too (loop.run_until).
NEXT_START_S = END_BEFORE_TICK_S + NEXT_START_ALLOWANCE_S


def time_to_poll(lambda_left_s: Callable[[], float], tick: datetime | None) -> Callable[[], float]:
    """Seconds this invocation may still poll: its Lambda time less the margin and, where its tick is known,
    up to END_BEFORE_TICK_S before the next tick."""
    if tick is None:
        return lambda: lambda_left_s() - LOOP_MARGIN_S
    next_tick = tick.timestamp() + TICK_S
    return lambda: min(lambda_left_s() - LOOP_MARGIN_S, next_tick - END_BEFORE_TICK_S - time.time())


def tick_of(event: Mapping[str, Any]) -> datetime | None:
    """When the invocation's tick fired (the EventBridge event's `time`, which the rule's target passes as
    TICK_FIELD); None where the event does not say (an invocation by hand) or says it in no form known."""
    given = event.get(TICK_FIELD)
    if not isinstance(given, str):
        return None
    try:
        tick = datetime.fromisoformat(given)
    except ValueError:
        return None
    return tick if tick.tzinfo is not None else None
