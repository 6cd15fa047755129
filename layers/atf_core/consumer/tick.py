"""How long one consumer invocation polls, and how far its last poll reads ahead.

EventBridge ticks each consumer group every TICK_S. An invocation polls for RUN_S from its own start, then
returns: the next tick comes about as late after its tick as this one came after its own (the delivery's lag
is steady, give or take its jitter), so it finds this execution environment idle, and Lambda hands the next
invocation to it with this one's in-flight tracker. An invocation still polling at the next tick would send
that one to another environment, whose tracker is a minute or more old: it would send again every task sent
meanwhile that no worker had claimed yet (harmless, the claim is fenced, but a wasted message and a refused
write each). The last poll reads past the lookahead to the next invocation's first poll, with
NEXT_START_ALLOWANCE_S to spare for the jitter, so the tasks due in between are sent by this one and the
workers hold them until they are due. A lost tick leaves a gap, as before; a duplicated one means two
consumers for a while, which the conditional writes make harmless.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

TICK_S = 60  # EventBridge's rate(1 minute)
# What an invocation leaves of its Lambda timeout: its last poll's end, the metrics' flush, its return.
LOOP_MARGIN_S = 2.0
# An invocation has returned this long before the next tick would come, so that tick finds it idle.
END_BEFORE_TICK_S = 0.5
RUN_S = TICK_S - END_BEFORE_TICK_S
# How much later than this one the next invocation may start (after its tick) with the tasks due meanwhile
# still sent on time.
NEXT_START_ALLOWANCE_S = 2.0
# How long after an invocation's time is up the next one's first poll may come: the last poll reads that much
# further ahead (loop.run_until).
NEXT_START_S = END_BEFORE_TICK_S + NEXT_START_ALLOWANCE_S


def consumer_timeout_s(poll_interval: float) -> int:
    """The consumer function's timeout: RUN_S and the margin, with a poll interval and 2 s more for a last
    poll that starts late or runs long (never cut off by the timeout, which would lose its report)."""
    return TICK_S + math.ceil(LOOP_MARGIN_S) + math.ceil(poll_interval) + 2


def time_to_poll(lambda_left_s: Callable[[], float], started: float) -> Callable[[], float]:
    """Seconds this invocation may still poll: up to RUN_S after it `started` (time.monotonic()), within its
    Lambda time less the margin."""
    ends = started + RUN_S
    return lambda: min(lambda_left_s() - LOOP_MARGIN_S, ends - time.monotonic())
