"""`atf cost --rate` spreads the fixed costs over a rate of tasks: one of 0 or less (or not a number) would
print nonsense (a division by 0, or a credit), so it is refused as a usage error naming --rate; so are a
negative payload size, and frontend time, consumer groups or tasks per lifecycle of 0 or less."""

from __future__ import annotations

import pytest

from atf_sdk.cli import build_parser


@pytest.mark.parametrize("rate", ["-5", "0", "nan", "inf", "fast"])
def test_a_rate_not_above_0_is_refused_naming_it(rate: str, capsys: pytest.CaptureFixture[str]) -> None:
    # Given a rate that is no number of tasks a second; When atf cost is parsed
    with pytest.raises(SystemExit) as refused:
        build_parser().parse_args(["cost", "--rate", rate])
    # Then it is a usage error, naming --rate
    assert refused.value.code == 2
    assert "argument --rate: " in capsys.readouterr().err


def test_a_rate_above_0_is_taken() -> None:
    assert build_parser().parse_args(["cost", "--rate", "0.5"]).rate == 0.5


@pytest.mark.parametrize(
    ("option", "value"),
    [("--payload-bytes", "-1"), ("--frontend-ms", "0"), ("--frontend-ms", "nan"), ("--consumer-groups", "0"),
     ("--batch", "0"), ("--batch", "-3"), ("--consumer-groups", "two")],
)  # fmt: skip
def test_a_size_or_count_that_prices_nonsense_is_refused_naming_its_option(
    option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        build_parser().parse_args(["cost", option, value])
    assert refused.value.code == 2
    assert f"argument {option}: " in capsys.readouterr().err


def test_the_smallest_sensible_values_are_taken() -> None:
    args = ["cost", "--payload-bytes", "0", "--frontend-ms", "0.5", "--consumer-groups", "1", "--batch", "1"]
    parsed = build_parser().parse_args(args)
    assert (parsed.payload_bytes, parsed.frontend_ms, parsed.consumer_groups, parsed.batch) == (0, 0.5, 1, 1)
