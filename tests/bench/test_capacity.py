"""The capacity model's arithmetic: partitions, quotas and the poll loop's start-lag."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bench.capacity import (
    Assumptions,
    BurstScaling,
    Limits,
    all_due_at_once,
    burst_start_lag,
    host_rate,
    model,
    plan,
    recording,
    simulate_start_lag,
    tuned,
)


def test_shards_follow_the_index_partition_limit_and_the_consumer_groups() -> None:
    light = Assumptions(consumer_cpu_s_per_task=0.0001, store_latency_s_per_task=0.00001)  # partitions decide
    # 10,000 tasks/s x 2 index units on one (lambda, priority), at half of 1,000 units/s a partition
    assert plan(10_000, light).rows["index shards per (lambda, priority)"] == 40
    # spread over ten lambdas, each needs a tenth
    assert plan(10_000, replace(light, lambdas=10)).rows["index shards per (lambda, priority)"] == 4
    # a group polls whole shards: never fewer shards than groups
    heavy = plan(10_000, Assumptions(consumer_cpu_s_per_task=0.005)).rows
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
    # ten ms of round trips a task, four under way at once (the consumer's I/O threads)
    assert plan(1_000, latency_bound).rows["tasks/s one consumer group can enqueue"] == 400
    sequential = replace(latency_bound, consumer_io_threads=1)
    assert plan(1_000, sequential).rows["tasks/s one consumer group can enqueue"] == 100


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


def test_a_burst_waits_for_the_scale_out_chain_unless_the_look_ahead_started_it_earlier() -> None:
    burst = BurstScaling()  # 10,000 tasks at 1 s, 1 host of 8 slots x 1 s callbacks, up to 20 hosts
    assert host_rate(burst, Assumptions()) == 8.0  # the slots bind before the CPU (0.5 vCPU / 0.011 s = 45/s)
    assert burst.reaction_s == 60 + 3 * 60 + 60  # a metric point, target tracking's 3 points, Fargate's start
    lag = burst_start_lag(burst)
    assert lag["hosts after scaling out"] == 20
    without, with_ = lag["without look-ahead"], lag["with look-ahead"]
    # 1 host alone for 300 s starts 2,400 tasks; 20 hosts start the other 7,600 at 160/s
    assert without["max"] == 300 + 7_600 / 160
    # the look-ahead (5 minutes) covers the chain: 20 hosts from the first second
    assert with_["hosts ready at (s)"] == 0 and with_["max"] == 10_000 / 160
    assert lag["p95 start-lag saved (s)"] == round(without["p95"] - with_["p95"], 1) > 250


def test_a_look_ahead_shorter_than_the_chain_saves_only_what_it_covers() -> None:
    short = burst_start_lag(BurstScaling(lookahead_s=120))
    assert short["with look-ahead"]["hosts ready at (s)"] == 300 - 120
    none = burst_start_lag(BurstScaling(lookahead_s=0))
    assert none["last start saved (s)"] == 0


def test_a_service_at_zero_starts_on_its_own_alarm_and_has_nothing_before() -> None:
    burst = BurstScaling(min_tasks=0)
    assert burst.reaction_s == 60 + 60 + 60
    lag = burst_start_lag(burst)
    assert lag["without look-ahead"]["p50"] == pytest.approx(180 + 5_000 / 160, abs=0.1)
    assert lag["with look-ahead"]["max"] == 10_000 / 160
    assert "burst" in model((10_000,)) and model((10_000,))["burst"]["start-lag"] == burst_start_lag()


def test_the_report_shows_the_burst_with_and_without_look_ahead() -> None:
    from bench.report import _capacity

    text = _capacity(model((10_000,)))
    section = text[text.index("### A burst of 10,000 tasks due at one second") :]
    assert "| without look-ahead | 300 | 316.2 | 344.4 |" in section
    assert "| with look-ahead | 0 | 31.2 | 59.4 |" in section
    assert "Saved: 285 s at p95" in section and "- fargate_start_s = 60.0" in section


def test_100000_tasks_a_second_fits_the_derived_bounds_with_a_start_lag_p95_under_a_second() -> None:
    big = plan(100_000)
    assert big.rows["consumer groups"] <= Limits().max_consumer_groups
    assert big.rows["index shards per (lambda, priority)"] <= Limits().max_shards_per_lambda
    assert big.rows["SQS queues per (lambda, priority)"] > 1
    assert big.rows["SQS messages in flight per queue"] <= Limits().sqs_in_flight_per_queue / 2
    assert big.rows["start-lag with that many groups (ms)"]["p95"] <= 1000
    assert not any("groups needed" in n or "shards exceed" in n or "queues per" in n for n in big.notes)


def test_the_plan_and_a_deployed_configuration_derive_the_same_shards_and_queues() -> None:
    from atf_core.config import StackConfig

    for rate in (1_000, 10_000, 100_000):
        rows = plan(rate).rows
        config = StackConfig.model_validate({"shards": 1, "lambdas": {"hot": {"rate": rate}}})
        assert config.shards_of("hot") == rows["index shards per (lambda, priority)"]
        assert config.queue_parts_of("hot") == rows["SQS queues per (lambda, priority)"]


def test_a_million_due_at_once_is_paced_by_the_slowest_stage() -> None:
    sized = plan(100_000)
    million = all_due_at_once(1_000_000, sized, Assumptions())
    slowest = min(million["stage rates (tasks/s)"].values())
    assert million["stage rates (tasks/s)"][million["paced by"]] == slowest
    # a lookahead's worth goes out early; the rest at the slowest stage's rate
    assert million["last start after due (s)"] == pytest.approx((1_000_000 - slowest * 1.0) / slowest + 0.01, abs=0.1)
    small = all_due_at_once(1_000_000, plan(10_000), Assumptions())
    assert small["last start after due (s)"] > million["last start after due (s)"]


def test_each_plan_prices_a_million_tasks_from_its_own_sizes() -> None:
    built, recorded = plan(10_000), plan(10_000, recording(Assumptions()))
    writes = Assumptions().write_units_per_task * 0.625  # $0.625 per million write units
    assert writes < built.rows["dollars per million tasks"] < writes + 1.5
    assert recorded.rows["dollars per million tasks"] - built.rows["dollars per million tasks"] >= 0.62  # a unit more
    fewer_hosts = plan(10_000, replace(Assumptions(), worker_cpu_s_per_task=0.001))
    assert fewer_hosts.rows["dollars per million tasks"] < built.rows["dollars per million tasks"]
