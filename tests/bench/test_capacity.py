"""The capacity model's arithmetic: partitions, quotas and the poll loop's start-lag."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import pytest

from atf_core import sizing
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
from bench.report import _capacity as render_capacity

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "results.json"


def test_shards_follow_the_index_partition_limit_and_the_consumer_groups() -> None:
    light = Assumptions(consumer_cpu_s_per_task=0.0001, store_latency_s_per_task=0.00001)  # partitions decide
    # 10,000 tasks/s x 2 index units on one (lambda, priority), at half of 1,000 units/s a partition
    assert plan(10_000, light).rows["index shards per (lambda, priority)"] == 40
    # spread over ten lambdas, each needs a tenth
    assert plan(10_000, replace(light, lambdas=10)).rows["index shards per (lambda, priority)"] == 4
    # a group polls whole shards: never fewer shards than groups
    heavy = plan(10_000, Assumptions(consumer_cpu_s_per_task=0.005)).rows
    assert heavy["index shards per (lambda, priority)"] >= heavy["consumer groups"] > 40


def test_the_base_table_its_index_and_the_reads_are_each_held_to_their_own_quota() -> None:
    # 10,000 tasks/s: 3 units a task on the base table, 2 on the due index, 0.5 read: each under its 40,000
    ten = plan(10_000)
    rows = (ten.rows["base table write units/s"], ten.rows["due index (GSI) write units/s"])
    assert rows == (30_000, 20_000) and ten.rows["table read units/s"] == 5_000
    assert not any("quota" in n for n in ten.notes)  # together 50,000, but the quota is per table and per GSI
    base_only = plan(15_000)  # base table 45,000 over; index 30,000 and reads 7,500 under
    assert [n for n in base_only.notes if "quota" in n] == [
        "45,000 write units/s on the base table is over its default quota of 40,000: raise it (and pre-warm an "
        "on-demand table, which starts at 4,000 writes/s and doubles its peak)"
    ]
    big = plan(100_000)
    assert sum("quota" in n for n in big.notes) == 3
    assert "50,000 read units/s on the base table is over its default quota of 40,000: raise it" in big.notes
    assert any("batch route" in n for n in big.notes)  # 100,000 single-task requests/s > 10,000


def test_the_models_consumer_groups_are_what_the_cdk_app_deploys() -> None:
    built = Assumptions()
    assert built.consumer_cpu_s_per_task == sizing.CONSUMER_CPU_S_PER_TASK  # the planning figure
    for rate, groups in ((10_000, 40), (100_000, 400)):  # 250 tasks/s a group at 2 ms and half a vCPU
        assert plan(rate).rows["consumer groups"] == sizing.consumer_groups_for(rate, built.consumer_mb) == groups


def test_a_benchmark_run_records_its_consumer_cpu_beside_the_plan_without_changing_the_groups() -> None:
    from bench.__main__ import _capacity

    results = json.loads(RESULTS.read_text())
    modelled = _capacity(argparse.Namespace(), Path("unused"), results)
    built = modelled["designs"]["as built"]
    assert built["consumer_cpu_s_per_task"] == sizing.CONSUMER_CPU_S_PER_TASK
    assert built["consumer_cpu_s_measured"] == round(results["throughput"]["cpu_s_per_task"]["consumer"], 5)
    groups = [p["rows"]["consumer groups"] for p in modelled["plans"]["as built"]]
    assert groups == [sizing.consumer_groups_for(r, built["consumer_mb"]) for r in (10_000, 100_000)]


def test_the_committed_runs_consumer_cpu_is_within_the_planning_figure() -> None:
    results = json.loads(RESULTS.read_text())
    measured = [results["throughput"]["cpu_s_per_task"]["consumer"]]
    measured += [results["consumer"][run]["cpu_ms_per_task"] / 1000 for run in ("before", "after")]
    assert max(measured) <= sizing.CONSUMER_CPU_S_PER_TASK, "raise atf_core.sizing.CONSUMER_CPU_S_PER_TASK"


def test_a_full_vcpu_at_1_ms_a_task_is_500_a_group_not_a_hair_less() -> None:
    # 1769 * (1 / 1769) is 0.9999999999999999: 10,000 tasks/s needed 21 groups of 499.99, not 20
    one_ms = Assumptions(consumer_cpu_s_per_task=0.001)
    assert plan(10_000, one_ms).rows["consumer groups"] == 20
    assert plan(100_000, one_ms).rows["consumer groups"] == 200


def test_a_plan_names_the_memory_setting_when_the_deployed_default_needs_more_groups() -> None:
    note = "set consumer.memory_mib = 1769: at its default 512 MiB the CDK app would need 139 consumer groups"
    assert any(n.startswith(note) for n in plan(10_000).notes)  # 512 MiB: 0.29 vCPU, 72.4 tasks/s a group
    assert not any("consumer.memory_mib" in n for n in plan(10_000, Assumptions(consumer_mb=512)).notes)


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
    text = render_capacity(model((10_000,)))
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
    million = all_due_at_once(1_000_000, plan(100_000), Assumptions())
    assert million["stage rates (tasks/s)"] == {
        "consumer groups' sends": 200_000,  # 400 groups x 1 vCPU / 2 ms
        "worker hosts' starts": 200_000,  # 2,200 vCPUs / 11 ms
        "base table's write quota": 150_000,  # 300,000 units/s raised for the plan / (claim 1 + success 1)
        "due index's write quota": 200_000,  # 200,000 units/s raised for the plan / the entry's removal 1
        "table's read quota": 100_000,  # 50,000 units/s raised for the plan / 0.5 (eventually consistent)
        "SQS in flight": 240_000,  # 4 queues x 120,000 / 2 s in flight
    }
    assert million["paced by"] == "table's read quota"
    # a lookahead's worth (100,000) goes out early; 900,000 more at 100,000/s, then the claim's 10 ms
    assert (million["last start after due (s)"], million["p50 start after due (s)"]) == (9.0, 4.0)
    small = all_due_at_once(1_000_000, plan(10_000), Assumptions())["stage rates (tasks/s)"]
    # on the stack for 10,000/s the default quotas (40,000) are above what the plan asks for
    assert (small["base table's write quota"], small["due index's write quota"]) == (20_000, 40_000)
    assert small["table's read quota"] == 80_000


def test_each_plan_prices_a_million_tasks_from_its_own_sizes() -> None:
    built, recorded = plan(10_000), plan(10_000, recording(Assumptions()))
    # writes 5 x $0.625 = 3.125, reads 0.5 x $0.125 = 0.0625, SQS 0.5 x $0.40 = 0.20, API ($3.50 + $0.20)/100 =
    # 0.037, Lambda (40 groups x 1769/1024 GB + 100 requests/s x 0.08 s x 0.5 GB) x 100 s x $0.0000166667 = 0.122,
    # Fargate 220 vCPUs x 100 s / 3600 x ($0.04048 + 2 x $0.004445) = 0.302: $3.85
    assert built.rows["dollars per million tasks"] == 3.85
    assert "| dollars per million tasks | 3.85 |" in render_capacity(model((10_000,)))
    assert recorded.rows["dollars per million tasks"] - built.rows["dollars per million tasks"] >= 0.62  # a unit more
    fewer_hosts = plan(10_000, replace(Assumptions(), worker_cpu_s_per_task=0.001))
    assert fewer_hosts.rows["dollars per million tasks"] < built.rows["dollars per million tasks"]


def test_the_report_lists_what_each_other_design_changes() -> None:
    text = render_capacity(model((10_000,)))
    assert "| with record_enqueued | consumer_cpu_s_per_task | 0.002 | 0.005 |" in text
    assert "| with record_enqueued | store_latency_s_per_task | 0.0002 | 0.006 |" in text
    assert "| half lookahead and poll interval | lookahead_s | 1 | 0.5 |" in text
    assert "| half lookahead and poll interval | write_units_per_task |" not in text  # unchanged: not listed


def test_the_report_shows_the_planned_and_measured_consumer_cpu_and_says_when_to_raise_the_plan() -> None:
    within = render_capacity(model((10_000,), Assumptions(consumer_cpu_s_measured=0.00098)))
    assert "Consumer CPU per task: 2.00 ms planned" in within and "0.98 ms measured (throughput step)" in within
    assert "raise atf_core.sizing.CONSUMER_CPU_S_PER_TASK" not in within
    over = render_capacity(model((10_000,), Assumptions(consumer_cpu_s_measured=0.0021)))  # over 2 ms
    assert "**The measurement exceeds the plan: raise atf_core.sizing.CONSUMER_CPU_S_PER_TASK.**" in over
