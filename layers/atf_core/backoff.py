"""Exponential backoff: one formula for the longest wait, and a jitter chosen by who waits.

The n-th retry (n from 1) waits at most `base * 2**(n - 1)` seconds, capped at `cap`.
Where in that ceiling a wait falls depends on what is waiting:

- a task's next attempt after a retriable failure (the executor): equal jitter, half
  the ceiling plus a uniform draw over the other half. Tasks that failed together
  (a downstream outage) still spread out, and none comes back sooner than half its
  step: a retry at once would mostly meet the same outage.
- a client's next try of one API call (atf_sdk.transport.RetryPolicy): full jitter, a
  uniform draw over the whole ceiling. Many clients pushed back at once by a throttled
  stage spread over the widest window, which clears the contention soonest.
- a batch read's next try for the keys DynamoDB left unprocessed (store.table): full
  jitter too, for the same reason: the readers a table throttled together spread out.
- a worker host's next receive after a failing one (the controller): the ceiling
  itself. One loop per queue on one host: there is nothing to spread.

`draw` is a uniform draw in [0, 1), passed in so that a test can choose it.
"""

from __future__ import annotations


def ceiling(retry: int, base: float, cap: float) -> float:
    """The longest the `retry`-th retry waits."""
    return min(cap, base * 2.0 ** max(0, retry - 1))


def equal_jitter(retry: int, base: float, cap: float, draw: float) -> float:
    longest = ceiling(retry, base, cap)
    return longest / 2 + longest / 2 * draw


def full_jitter(retry: int, base: float, cap: float, draw: float) -> float:
    return ceiling(retry, base, cap) * draw
