"""`atf cost --rate` spreads the fixed costs over a rate of tasks: one of 0 or less (or not a number) would
print nonsense (a division by 0, or a credit), so it is refused as a usage error naming --rate."""

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
