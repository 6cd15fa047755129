"""The configuration refuses timeouts that would let one task run twice at once."""

from __future__ import annotations

import json

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


def test_names_that_would_share_a_queue_are_refused_naming_the_priorities() -> None:
    # Given two lambdas whose lambda and priority names join, with "-", into the same queue name
    both = {
        "a-b": LambdaSpec(priorities=["c"], default_priority="c"),
        "a": LambdaSpec(priorities=["b-c"], default_priority="b-c"),
    }
    # Then the configuration is refused, naming where the second one comes from
    with pytest.raises(
        ValidationError, match=r"lambdas\.a\.priorities: queue name 'atf-a-b-c' is also \(a-b, c, part 0\)"
    ):
        StackConfig(lambdas=both)


def test_a_priority_named_like_a_split_part_is_refused() -> None:
    # Given a priority "normal" split over two queues ("normal", "normal-1") beside a priority named "normal-1"
    spec = LambdaSpec(priorities=["normal", "normal-1"], queue_parts=2)
    with pytest.raises(ValidationError, match="atf-demo-normal-1"):
        StackConfig(lambdas={"demo": spec})
    # Then one queue each is fine
    assert StackConfig(lambdas={"demo": LambdaSpec(priorities=["normal", "normal-1"])})


def test_queue_names_must_fit_sqs() -> None:
    long_lambda = "l" * 40
    with pytest.raises(ValidationError, match=f"lambdas.{long_lambda}.priorities: queue name .* longer than SQS's 80"):
        StackConfig(name="a" * 21, lambdas={long_lambda: LambdaSpec(priorities=["p" * 20], default_priority="p" * 20)})


@pytest.mark.parametrize("priority", ["High", "with space", "", "x" * 21, "9first"])
def test_priority_names_are_checked(priority: str) -> None:
    with pytest.raises(ValidationError, match=r"priorities\.0"):
        LambdaSpec(priorities=[priority], default_priority=priority)


@pytest.mark.parametrize(
    ("lambda_fields", "says"),
    [
        ({"collection_limits": {"c": {}}}, "collection_limits of ['c'] need max_running or max_starts_per_second"),
        ({"collection_limits": {"ü x": {"max_running": 1}}}, "collection_limits.ü x.[key]"),
        ({"limits": {"max_running": True}}, "limits.max_running\n  Input should be a valid integer"),
        (
            {"limits": {"max_starts_per_second": "NaN"}},
            "limits.max_starts_per_second\n  Input should be a finite number",
        ),
    ],
)
def test_limits_that_could_never_apply_are_refused_naming_them(lambda_fields: dict[str, object], says: str) -> None:
    document = {"lambdas": {"w": {"priorities": ["normal"], **lambda_fields}}}
    with pytest.raises(ValidationError) as refused:
        StackConfig.model_validate_json(json.dumps(document).replace('"NaN"', "NaN"))
    assert says in str(refused.value)
