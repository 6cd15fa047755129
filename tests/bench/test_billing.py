"""The cost meter's arithmetic and the prices it compares with (no AWS involved)."""

from __future__ import annotations

from collections import Counter

import pytest

from atf_local.cost.billing import Bill, Price, lambda_dollars, peer_costs
from atf_local.cost.report import per_task


def test_bills_add_subtract_and_round_trip() -> None:
    a = Bill(6, 1.5, 3, Counter({"dynamodb.PutItem": 1}), {"dynamodb.PutItem/write_units": 2.0})
    b = Bill(2, 0.5, 1, Counter({"dynamodb.PutItem": 1}), {"dynamodb.PutItem/write_units": 2.0})
    assert (a - b).write_units == 4 and (a - b).calls == Counter() and (a - b).detail == {}
    assert (a + b).detail == {"dynamodb.PutItem/write_units": 4.0}
    assert Bill.from_dict(a.to_dict()) == a
    assert a.per_task(3) == {"write_units": 2, "read_units": 0.5, "sqs_requests": 1}


def test_dollars_per_million_tasks_use_the_on_demand_prices() -> None:
    # 6 write units, 2 read units and 0.3 SQS requests per task: 6 x 0.625 + 2 x 0.125 + 0.3 x 0.40
    bill = Bill(write_units=6_000, read_units=2_000, sqs_requests=300)
    cost = per_task("steady", bill, {}, 1_000)
    assert cost.dollars_per_million == pytest.approx(4.12)


def test_peers_are_priced_as_the_issue_describes() -> None:
    peers = {p.name: p.dollars_per_million for p in peer_costs()}
    assert peers == {
        "EventBridge Scheduler": pytest.approx(1.40),
        "Step Functions Standard": pytest.approx(100.0),
        "Google Cloud Tasks": pytest.approx(0.80),
    }


def test_lambda_is_billed_by_gigabyte_seconds_and_requests() -> None:
    # a 512 MB consumer running all month: 0.5 GB x 2,592,000 s
    month = lambda_dollars(0.5 * 2_592_000, 43_200)
    assert month == pytest.approx(0.5 * 2_592_000 * Price.LAMBDA_GB_SECOND_X86 + 0.0432 * 0.20)
    assert lambda_dollars(1, 0, arm=True) < lambda_dollars(1, 0)
