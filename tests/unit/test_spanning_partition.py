"""The execute-api ARN a spanning request's items are checked against is in the caller's partition: an
API in China or GovCloud would otherwise be checked against ARNs no policy there names, refusing everyone."""

from __future__ import annotations

import pytest

from functions.frontend.spanning import partition_of


@pytest.mark.parametrize(
    ("caller", "partition"),
    [
        ("arn:aws:sts::111122223333:assumed-role/team-a/session", "aws"),
        ("arn:aws-cn:iam::111122223333:user/ops", "aws-cn"),
        ("arn:aws-us-gov:sts::111122223333:assumed-role/team-b/s", "aws-us-gov"),
    ],
)
def test_the_partition_is_the_callers(caller: str, partition: str) -> None:
    assert partition_of(caller) == partition


@pytest.mark.parametrize("caller", [None, "", "not-an-arn", "arn::iam::1:user/x"])
def test_no_arn_means_the_commercial_partition(caller: str | None) -> None:
    assert partition_of(caller) == "aws"
