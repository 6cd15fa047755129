"""The capacity model's arithmetic: partitions, quotas and the poll loop's start-lag."""

from __future__ import annotations

from dataclasses import replace

from bench.capacity import Assumptions, Limits, model, plan, recording, simulate_start_lag, tuned


def test_shards_follow_the_index_partition_limit_and_the_consumer_groups() -> None:
    light = Assumptions(consumer_cpu_s_per_task=0.0001, store_latency_s_per_task=0.00001)  # partitions decide
    # 10,000 tasks/s x 2 index units on one (lambda, priority), at half of 1,000 units/s a partition
    assert plan(10_000, light).rows["index shards per (lambda, priority)"] == 40
    # spread over ten lambdas, each needs a tenth
    assert plan(10_000, replace(light, lambdas=10)).rows["index shards per (lambda, priority)"] == 4
    # a group polls whole shards: never fewer shards than groups
    heavy = plan(10_000).rows
    assert heavy["index shards per (lambda, priority)"] >= heavy["consumer groups"] > 40


def test_the_table_quota_and_api_gateway_are_flagged_when_exceeded() -> None:
    small, big = plan(5_000), plan(100_000)
    assert small.rows["table write units/s"] == 25_000 and not any("quota" in n for n in small.notes)
    assert any("raise the quota" in n for n in big.notes)
    assert any("batch route" in n for n in big.notes)  # 100,000 single-task requests/s > 10,000


def test_a_consumer_is_bounded_by_cpu_or_by_its_store_calls() -> None:
    cpu_bound = Assumptions(consumer_cpu_s_per_task=0.005, consumer_mb=1769, headroom=0.5)
    assert plan(1_000, cpu_bound).rows["tasks/s one consumer group can enqueue"] == 100
    latency_bound = replace(
        cpu_bound, consumer_cpu_s_per_task=0.0001, store_latency_s_per_task=0.009, send_latency_s=0.01
    )
    assert plan(1_000, latency_bound).rows["tasks/s one consumer group can enqueue"] == 100


def test_start_lag_is_small_while_the_consumer_keeps_up_and_grows_when_it_does_not() -> None:
    a = Assumptions(consumer_cpu_s_per_task=0.001, store_latency_s_per_task=0.001, claim_latency_s=0.01)
    keeping_up = simulate_start_lag(100, a)
    assert keeping_up["p99"] < 0.05  # sent ahead of time: only the claim remains
    falling_behind = simulate_start_lag(2_000, a, seconds=10)
    assert falling_behind["p50"] > 1.0


def test_recording_enqueued_costs_a_write_unit_and_consumer_groups_and_half_lookahead_halves_in_flight() -> None:
    built = Assumptions()
    assert recording(built).write_units_per_task == built.write_units_per_task + 1
    report = model((10_000,))
    assert set(report["plans"]) == {"as built", "half lookahead and poll interval", "with record_enqueued"}
    rows = {d: p[0]["rows"] for d, p in report["plans"].items()}
    assert rows["with record_enqueued"]["consumer groups"] > rows["as built"]["consumer groups"]
    in_flight = {d: r["SQS messages in flight per queue"] for d, r in rows.items()}
    assert in_flight["half lookahead and poll interval"] < in_flight["as built"]
    assert tuned(built).lookahead_s == built.lookahead_s / 2
    assert report["limits"] == Limits().__dict__
