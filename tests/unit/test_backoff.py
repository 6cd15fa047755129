"""One backoff formula; the jitter each kind of wait draws within it."""

from __future__ import annotations

import pytest

from atf_core.backoff import ceiling, equal_jitter, full_jitter


def test_the_ceiling_doubles_from_the_base_up_to_the_cap() -> None:
    assert [ceiling(n, 0.5, 3.0) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


@pytest.mark.parametrize("retry", [1, 2, 9])
def test_a_task_waits_at_least_half_its_step_and_a_client_anywhere_in_it(retry: int) -> None:
    longest = ceiling(retry, 2.0, 300.0)
    assert (equal_jitter(retry, 2.0, 300.0, 0.0), equal_jitter(retry, 2.0, 300.0, 0.999)) == pytest.approx(
        (longest / 2, longest * 0.9995)
    )
    assert (full_jitter(retry, 2.0, 300.0, 0.0), full_jitter(retry, 2.0, 300.0, 0.5)) == (0.0, longest / 2)
