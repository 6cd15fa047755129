"""The configuration refuses timeouts that would let one task run twice at once."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from atf_core.aws import HEARTBEAT_CALL_BUDGET_S
from atf_core.config import LambdaSpec, StackConfig, Timeouts


def test_heartbeat_timeout_must_exceed_three_intervals_plus_retry_budget() -> None:
    floor = 3 * 2 + HEARTBEAT_CALL_BUDGET_S
    with pytest.raises(ValidationError, match="heartbeat"):
        Timeouts(heartbeat_interval=2, heartbeat=floor, claim=floor + 10)
    assert Timeouts(heartbeat_interval=2, heartbeat=floor + 0.5, claim=floor + 10).heartbeat == floor + 0.5


def test_claim_timeout_is_at_least_the_heartbeat_timeout() -> None:
    with pytest.raises(ValidationError, match="claim"):
        Timeouts(heartbeat_interval=1, heartbeat=20, claim=15)


def test_default_priority_must_be_declared() -> None:
    with pytest.raises(ValidationError, match="default_priority"):
        LambdaSpec(priorities=["high", "low"], default_priority="normal")


def test_lambda_names_are_checked() -> None:
    with pytest.raises(ValidationError, match="lambda name"):
        StackConfig(lambdas={"Bad Name": LambdaSpec()})


def test_per_lambda_shards_override_the_default() -> None:
    config = StackConfig(shards=4, lambdas={"a": LambdaSpec(), "b": LambdaSpec(shards=20)})
    assert (config.shards_of("a"), config.shards_of("b")) == (4, 20)
