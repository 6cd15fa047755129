"""The benchmark harness's own logic: percentiles, poll detection, the meter hook, the report."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from atf_core.telemetry import percentile
from bench.common import summary
from bench.throughput import consumer_polls, steady_rate

REPO = Path(__file__).resolve().parents[2]


def test_percentiles_are_nearest_rank_and_unstarted_tasks_make_them_unknown() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 0.5), percentile(values, 0.95), percentile(values, 1)) == (50, 95, 100)
    assert (percentile([3, 1, 2, 4], 0.5), percentile([7.0], 0.01), percentile(values, 0.07)) == (2, 7.0, 7)
    censored = summary([10.0] * 90 + [math.inf] * 10)
    assert censored["p50"] == 10 and censored["p95"] is None and censored["not_started"] == 10


def test_polls_are_runs_of_enqueue_writes(tmp_path: Path) -> None:
    writes = [0.0, 0.1, 0.2, 2.0, 2.05, 5.0]
    lines = [{"kind": "write", "transition": "enqueue", "result": "applied", "t": t} for t in writes]
    lines.append({"kind": "write", "transition": "enqueue", "result": "rejected", "t": 2.1})
    (tmp_path / "wire-1.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    polls = consumer_polls(tmp_path)
    assert polls["polls"] == 3 and polls["max_tasks"] == 3
    assert polls["max_seconds"] == pytest.approx(0.2)
    assert polls["seconds_per_task"] == pytest.approx(0.25 / 3)


def test_polls_are_runs_of_sends_when_the_consumer_does_not_write(tmp_path: Path) -> None:
    lines = [{"kind": "sent", "task": str(i), "attempt": 0, "t": t} for i, t in enumerate([0.0, 0.1, 3.0])]
    (tmp_path / "wire-1.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    polls = consumer_polls(tmp_path)
    assert polls["polls"] == 2 and polls["max_tasks"] == 2 and polls["rejected_enqueues"] == 0


def test_the_steady_rate_leaves_out_filling_and_draining_the_pipeline() -> None:
    # a slow start (10 s for the first 10), then 80 tasks at 20/s, then a slow tail
    ends = [i * 1.0 for i in range(10)] + [10 + i / 20 for i in range(80)] + [15 + i for i in range(10)]
    assert steady_rate(ends) == pytest.approx(20, rel=0.05)
    assert steady_rate([1.0]) == 0.0


def test_the_hook_meters_every_client_of_a_process_it_is_loaded_into(tmp_path: Path) -> None:
    program = (
        "from moto import mock_aws\n"
        "import boto3\n"
        "with mock_aws():\n"
        "    sqs = boto3.client('sqs', region_name='us-east-1')\n"
        "    sqs.create_queue(QueueName='q')\n"
        "    sqs.list_queues()\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "bench" / "hook"), str(REPO)]),
        "BENCH_METER_DIR": str(tmp_path),
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
    }
    subprocess.run([sys.executable, "-c", program], env=env, check=True, timeout=60)
    [dump] = list(tmp_path.glob("*.json"))
    bill = json.loads(dump.read_text())["bill"]
    assert bill["calls"] == {"sqs.CreateQueue": 1, "sqs.ListQueues": 1} and bill["sqs_requests"] == 2


FORKED_PROGRAM = """
import multiprocessing, os, sys


def calls():
    from moto import mock_aws
    import boto3

    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        sqs.create_queue(QueueName="q")
    print(os.getpid())


if __name__ == "__main__":
    context = multiprocessing.get_context("forkserver")
    child = context.Process(target=calls)
    child.start()
    child.join()
    sys.exit(child.exitcode)
"""


def test_the_hook_meters_a_process_forked_from_a_fork_server_and_dumps_its_bill_as_it_exits(tmp_path: Path) -> None:
    # A worker host's executors fork from a server that ran the hook and made no client of its own; a forked
    # multiprocessing child leaves through os._exit, past atexit.
    program = tmp_path / "forked.py"
    program.write_text(FORKED_PROGRAM)
    meter = tmp_path / "meter"
    meter.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "bench" / "hook"), str(REPO)]),
        "BENCH_METER_DIR": str(meter),
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
    }
    done = subprocess.run([sys.executable, str(program)], env=env, check=True, timeout=60, capture_output=True)
    child = int(done.stdout.decode().split()[-1])
    assert [p.name for p in meter.iterdir()] == [f"{child}.json"], "the child's bill only: the server made no call"
    bill = json.loads((meter / f"{child}.json").read_text())["bill"]
    assert bill["calls"] == {"sqs.CreateQueue": 1}


def test_the_committed_results_render() -> None:
    results = REPO / "bench" / "results" / "results.json"
    assert results.exists(), "the figures of the last run are committed with the benchmarks"
    from bench.report import render

    text = render(json.loads(results.read_text()))
    assert "## Targets" in text and "## Capacity model" in text
    # The committed report is what the committed results render to: a change to the model or the report
    # must come with `python -m bench --reuse bench/results/results.json --only capacity`.
    assert (REPO / "bench" / "results" / "report.md").read_text() == text


def test_the_consumers_sends_are_told_as_runs_of_polls_not_one_poll() -> None:
    from bench.report import render

    text = render(json.loads((REPO / "bench" / "results" / "results.json").read_text()))
    assert "in runs with no gap over 0.5 s (one poll or several back to back; 5 runs): at most 270 tasks" in text
    assert "in one poll" not in text


def _with_peer(framework_steady: float) -> dict[str, object]:
    results = json.loads((REPO / "bench" / "results" / "results.json").read_text())
    pool = {"pool": "prefork", "concurrency": 2, "tasks": 600, "completed": 600, "seconds": 12.0,
            "tasks_per_s": 50.0, "sending_per_s": 80.0, "steady_per_s": 52.5}  # fmt: skip
    results["throughput"] = {**results["throughput"], "steady_per_s": framework_steady,
                             "celery": {"prefork 2": pool, "threads 8": {**pool, "steady_per_s": 48.0}}}  # fmt: skip
    return results


def test_the_report_puts_celery_beside_the_framework_and_checks_the_goal_against_each_pool() -> None:
    from bench.report import render

    text = render(_with_peer(60.0))
    assert "Side by side: Celery 5 on the same embedded SQS" in text
    assert "| Celery 5, SQS transport, prefork 2 | 600 | **52.5** |" in text and "threads 8 | 600 | **48.0** |" in text
    assert "| steady throughput vs Celery 5 on the same SQS | >= each pool's | yes |" in text
    below_one_pool = render(_with_peer(50.0))
    assert "| steady throughput vs Celery 5 on the same SQS | >= each pool's | **no** |" in below_one_pool


def test_without_the_peer_the_goal_is_not_measured() -> None:
    from bench.report import render

    results = _with_peer(60.0)
    results["throughput"]["celery"] = {}  # type: ignore[index]
    text = render(results)
    assert "| steady throughput vs Celery 5 on the same SQS | >= each pool's | not measured |" in text
    assert "Side by side" not in text


def _with_fairness(flooded_p95: float, late: bool = False) -> dict[str, object]:
    results = json.loads((REPO / "bench" / "results" / "results.json").read_text())

    def round_(p50: float, p95: float, late: bool) -> dict[str, object]:
        lag = {"n": 200, "not_started": 0, "p50": p50, "p95": p95, "max": p95 + 100}
        return {"scheduled_s": 70.0, "started_early": late, "scheduled_per_s": 70.0, "others_lag_ms": lag,
                "a_done": 5000, "a_tasks_per_s": 30.0, "others_send_rank": {"p50": 110, "max": 230}}  # fmt: skip

    alone, flooded = round_(2000.0, 4000.0, False), round_(3000.0, flooded_p95, late)
    ratio = {"p50": 1.5, "p95": flooded_p95 / 4000.0}
    results["fairness"] = {"flood": 5000, "keys": 10, "per_key": 20, "shards": 8, "alone": alone,
                           "flooded": flooded, "others_lag_ratio": ratio}  # fmt: skip
    return results


def test_the_report_checks_fairness_against_the_2x_goal_and_voids_a_run_whose_pause_did_not_hold() -> None:
    from bench.report import render

    met = render(_with_fairness(6000.0))
    assert "| keys B..K's start-lag p95 beside a flood / alone | <= 2 | yes |" in met
    assert "| ratio (goal: within 2x) | 1.50x | 1.50x | | |" in met and "Void" not in met
    assert "B..K's 200 tasks among the consumer's sends of the round (alone: median 110, last 230; beside A:" in met
    missed = render(_with_fairness(12000.0))
    assert "| keys B..K's start-lag p95 beside a flood / alone | <= 2 | **no** |" in missed
    void = render(_with_fairness(6000.0, late=True))
    assert "| keys B..K's start-lag p95 beside a flood / alone | <= 2 | not measured |" in void
    assert "**Void:** in beside A's flood, some tasks started before the pause was lifted." in void


def test_a_step_run_again_says_when_and_at_which_commit() -> None:
    from bench.report import render

    results = _with_fairness(6000.0)
    results["fairness"]["rerun"] = {"date": "2026-11-23T21:55:12+00:00", "commit": "abc1234",  # type: ignore[index]
                                    "load_at_start": ["0.5", "0.9", "1.1"]}  # fmt: skip
    text = render(results)
    assert (
        "Step `fairness` run again 2026-11-23T21:55:12+00:00 on commit abc1234, load average at start 0.50 0.90" in text
    )
    results["fairness"]["rerun"]["load_at_start"] = [0.5, 0.9, 1.1]  # type: ignore[index]  # os.getloadavg's
    assert "load average at start 0.50 0.90 1.10." in render(results)
    assert "Step `fairness` run again" not in render(_with_fairness(6000.0))


def test_the_report_tells_the_keys_behind_the_flood_from_the_others() -> None:
    from bench.report import render

    results = _with_fairness(6000.0)
    fairness: Any = results["fairness"]
    fairness["keys_in_a_shard"] = ["J"]
    fairness["flooded"]["by_key"] = {
        "B": {"last_rank": 200, "last_start_ms": 2500.0},
        "C": {"last_rank": 210, "last_start_ms": 2700.4},
        "J": {"last_rank": 249, "last_start_ms": 3121.2},
    }
    text = render(results)
    assert (
        "Beside A's flood, the keys that share its shard (their tasks wait behind it): J: last sent at send 249,"
        " started 3,121 ms after the resume. The other keys' last tasks started 2,500 to 2,700 ms after the resume."
    ) in text
    assert "share its shard" not in render(_with_fairness(6000.0))  # results from before the split was kept
    fairness["flooded"]["by_key"]["J"] = {"last_rank": None, "last_start_ms": None}
    assert "J: not all sent, not all started in the window." in render(results)


def test_each_keys_last_send_and_start_or_none_where_one_of_its_tasks_never_got_there() -> None:
    from bench.fairness import _by_key

    keyed = [("B", "b1"), ("B", "b2"), ("J", "j1"), ("J", "j2")]
    rank = {"b1": 3, "b2": 1, "j1": 7}
    lag = {"b1": 900.0, "b2": 1200.0, "j1": 2000.0, "j2": math.inf}
    assert _by_key(keyed, rank, lag) == {
        "B": {"last_rank": 3, "last_start_ms": 1200.0},
        "J": {"last_rank": None, "last_start_ms": None},
    }


def test_a_partial_run_without_reuse_is_refused_rather_than_replace_the_committed_results(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import bench.__main__ as entry

    monkeypatch.setattr(entry, "RESULTS", tmp_path)  # the default --out, in case the refusal fails
    with pytest.raises(SystemExit) as refused:
        entry.main(["--only", "cost", "capacity"])
    assert refused.value.code == 2 and "give --out DIR, or --reuse" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_without_matplotlib_the_results_are_written_and_the_figures_skipped_with_a_notice(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import bench
    from bench.__main__ import _write
    from bench.report import render

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    monkeypatch.delitem(sys.modules, "bench.plots", raising=False)
    monkeypatch.delattr(bench, "plots", raising=False)
    results = json.loads((REPO / "bench" / "results" / "results.json").read_text())
    _write(results, tmp_path)
    assert (tmp_path / "report.md").read_text() == render(results)
    assert "figures not drawn: matplotlib is not installed" in capsys.readouterr().out
    assert not list(tmp_path.glob("*.png"))


def test_the_machine_is_described_where_there_is_no_proc(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.machine import describe

    read_text = Path.read_text

    def no_proc(self: Path, *args: Any, **kwargs: Any) -> str:
        if str(self).startswith("/proc/"):
            raise FileNotFoundError(self)
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", no_proc)
    machine = describe(REPO)
    assert len(machine["load_at_start"]) == 3 and all(isinstance(x, float) for x in machine["load_at_start"])
    assert machine["memory_gb"] > 0 and machine["cpu"]


def test_the_report_says_what_each_side_ran_with() -> None:
    from bench.report import render

    results = _with_peer(60.0)
    for pool in results["throughput"]["celery"].values():  # type: ignore[index]
        pool.update(versions={"celery": "5.7.0", "kombu": "5.7.0"}, transport_options={"polling_interval": 0})
    text = render(results)
    assert "This framework: one worker host of 4 executors x 4 threads, long polls of 10 s." in text
    assert "Celery: celery 5.7.0, kombu 5.7.0, one worker per pool, long polls (kombu's default), " in text
    assert "transport options: polling_interval 0." in text
