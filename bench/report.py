"""bench/results/report.md from one run's results (the same figures as results.json)."""

from __future__ import annotations

from typing import Any

from bench.capacity import DOLLARS_ROW

TARGETS = {
    "happy-path write units per task": ("<= 5", lambda r: r["cost"]["scenarios"][0]["write_units"] <= 5),
    "SQS requests per task at load": ("<= 0.35", lambda r: r["throughput"]["sqs_requests_per_task"] <= 0.35),
    "start-lag p95 at 50 tasks/s": ("<= 250 ms", lambda r: _lag_ok(r["lag"].get("spec"), "p95", 250)),
    "start-lag p99 at 50 tasks/s": ("<= 1,000 ms", lambda r: _lag_ok(r["lag"].get("spec"), "p99", 1000)),
    "throughput / backend ceiling (steady rate)": (">= 0.7", lambda r: (r["throughput"]["ratio"] or 0) >= 0.7),
    "steady throughput vs Celery 5 on the same SQS": (">= each pool's", lambda r: _beats_peer(r["throughput"])),
    "keys B..K's start-lag p50 beside a flood / alone": ("<= 2", lambda r: _fair(r["fairness"], "p50")),
    "keys B..K's start-lag p95 beside a flood / alone": ("<= 2", lambda r: _fair(r["fairness"], "p95")),
}


def _fair(run: dict[str, Any], q: str) -> bool:
    if run["flooded"]["started_early"]:  # the pause did not hold every task until all were in
        raise KeyError("started_early")
    return bool(run["others_lag_ratio"][q] <= 2)


def _beats_peer(run: dict[str, Any]) -> bool:
    peer = run["celery"] or {}
    if not peer:  # a run without the peer (or an older results.json) did not measure it
        raise KeyError("celery")
    return all(run["steady_per_s"] >= pool["steady_per_s"] for pool in peer.values())


def _lag_ok(run: dict[str, Any] | None, q: str, limit: float) -> bool:
    value = run and run["lag_ms"].get(q)
    return value is not None and value <= limit


def _ms(value: float | None) -> str:
    return "not started in the window" if value is None else f"{value:,.0f}"


def render(results: dict[str, Any]) -> str:
    parts = [_header(results), _targets(results), _cost(results["cost"]), _sqs(results), _lag(results["lag"]),
             _throughput(results["throughput"]), _capacity(results["capacity"])]  # fmt: skip
    if "consumer" in results:
        parts.insert(-1, _consumer(results["consumer"]))
    if "fairness" in results:
        parts.insert(-1, _fairness(results["fairness"]))
    return "\n\n".join(parts) + "\n"


def _consumer(run: dict[str, Any]) -> str:
    from bench.consumer_passes import summary

    return "\n".join(["## One consumer invocation's passes", "", "```", summary(run), "```"])


def _fairness(run: dict[str, Any]) -> str:
    """Keys B..K's start-lag with and without key A's flood (issue 16: within 2x), and A's throughput."""
    alone, flooded = run["alone"], run["flooded"]
    ratio = run["others_lag_ratio"]
    late = [name for name, r in (("alone", alone), ("beside A's flood", flooded)) if r["started_early"]]
    return "\n".join([
        "## Fairness between flow keys",
        "",
        f"Key A floods {run['flood']:,} tasks, then keys B..K schedule {run['per_key']} each ({run['shards']} "
        "shards), under a pause of the lambda; all are due when it is lifted. Lag = the callback's start minus "
        f"that moment. Scheduling took {alone['scheduled_s']:g} s alone and {flooded['scheduled_s']:g} s with "
        "the flood.",
        "",
        "| B..K start-lag | p50 ms | p95 ms | max ms | scheduled per s |",
        "| --- | ---: | ---: | ---: | ---: |",
        *(f"| {name} | {_ms(r['others_lag_ms'].get('p50'))} | {_ms(r['others_lag_ms'].get('p95'))} | "
          f"{_ms(r['others_lag_ms'].get('max'))} | {r['scheduled_per_s']:.0f} |"
          for name, r in (("alone", alone), ("beside A's flood", flooded))),
        f"| ratio (goal: within 2x) | {_times(ratio.get('p50'))} | {_times(ratio.get('p95'))} | | |",
        "",
        f"Key A: {flooded['a_done']:,} of {run['flood']:,} ran, at {_rate(flooded['a_tasks_per_s'])} tasks/s "
        "from the due moment to its last end.",
        *_ranks(run),
        *_behind_the_flood(run),
        *([f"\n**Void:** in {', '.join(late)}, some tasks started before the pause was lifted."] if late else []),
    ])  # fmt: skip


def _ranks(run: dict[str, Any]) -> list[str]:
    """Where the consumer put B..K's tasks among each round's sends (older results lack it)."""
    ranks = {name: run[r].get("others_send_rank") for name, r in (("alone", "alone"), ("beside A", "flooded"))}
    if not all(ranks.values()):  # none sent, or a run before the ranks were kept
        return []
    told = "; ".join(f"{name}: median {r['p50']:,.0f}, last {r['max']:,}" for name, r in ranks.items())
    return ["", f"B..K's {run['keys'] * run['per_key']} tasks among the consumer's sends of the round ({told})."]


def _behind_the_flood(run: dict[str, Any]) -> list[str]:
    """The keys that share A's index shard, whose tasks wait behind its flood, beside the others (older
    results lack it)."""
    sharing, by_key = run.get("keys_in_a_shard"), run["flooded"].get("by_key")
    if not sharing or not by_key:
        return []
    others = [v["last_start_ms"] for k, v in by_key.items() if k not in sharing and v["last_start_ms"] is not None]
    told = "; ".join(_key_told(k, by_key.get(k)) for k in sharing)
    spread = f"{_ms(min(others))} to {_ms(max(others))} ms" if others else "n/a"
    return ["", f"Beside A's flood, the keys that share its shard (their tasks wait behind it): {told}. The other"
            f" keys' last tasks started {spread} after the resume."]  # fmt: skip


def _key_told(key: str, figures: dict[str, Any] | None) -> str:
    if figures is None:
        return f"{key}: none of its tasks taken"
    rank, start = figures["last_rank"], figures["last_start_ms"]
    sent = "not all sent" if rank is None else f"last sent at send {rank:,}"
    started = "not all started in the window" if start is None else f"started {start:,.0f} ms after the resume"
    return f"{key}: {sent}, {started}"


def _times(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def _header(results: dict[str, Any]) -> str:
    m = results["machine"]
    return "\n".join([
        "# Benchmark results",
        "",
        f"Run {m['date']} on commit {m['commit']}: {m['cores']} cores ({m['cpu']}), {m['memory_gb']} GB, "
        f"{m['os']}, Python {m['python']}, moto {m['moto']}, boto3 {m['boto3']}. Load average at start "
        f"{_loads(m['load_at_start'])} (the machine is shared; each run below records its own); this Python "
        f"took {m.get('cpu_s_for_5m_additions', '?')} CPU s for 5M additions (scale the CPU figures by it).",
        "",
        "Produced by `make bench` (`python -m bench`); figures in `results.json`; how to read them: "
        "[docs/benchmarks.md](../../docs/benchmarks.md).",
        *_reruns(results),
    ])  # fmt: skip


def _reruns(results: dict[str, Any]) -> list[str]:
    """Steps run again later on top of this run (`--only STEP --reuse results.json`)."""
    again = [(step, run["rerun"]) for step, run in results.items() if isinstance(run, dict) and "rerun" in run]
    lines = [f"Step `{step}` run again {r['date']} on commit {r['commit']}" + _load(r) for step, r in again]
    return ["", *lines] if lines else []


def _load(rerun: dict[str, Any]) -> str:
    load = rerun.get("load_at_start")
    return f", load average at start {_loads(load)}." if load else "."


def _loads(values: list[Any]) -> str:
    """Load averages: strings as /proc/loadavg gave them in older results, floats from os.getloadavg() since."""
    return " ".join(f"{float(x):.2f}" for x in values)


def _targets(results: dict[str, Any]) -> str:
    lines = ["## Targets", "", "| target | goal | met |", "| --- | --- | --- |"]
    for name, (goal, check) in TARGETS.items():
        try:
            met = "yes" if check(results) else "**no**"
        except (KeyError, TypeError):
            met = "not measured"
        lines.append(f"| {name} | {goal} | {met} |")
    return "\n".join(lines)


def _cost(cost: dict[str, Any]) -> str:
    est = cost["estimate"]
    lines = [
        "## Cost per task (cost lifecycles, `atf cost`)",
        "",
        f"Stack config {cost['config']!r}, {est['payload_bytes']}-byte payload, {est['batch']} tasks per lifecycle "
        "(full SQS batches). All-in adds API Gateway REST and the frontend Lambda at one task per request and the "
        f"always-on consumer at {est['rate']:g} tasks/s.",
        "",
        "| lifecycle | write units | of which index | read units | SQS requests | DynamoDB+SQS $/M | all-in $/M "
        "| steps |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for s in cost["scenarios"]:
        steps = ", ".join(f"{k} {v:g}" for k, v in s["steps"].items())
        lines.append(
            f"| {s['name']} | {s['write_units']:.2f} | {s['index_units']:.2f} | {s['read_units']:.2f} | "
            f"{s['sqs_requests']:.2f} | {s['dollars_per_million']:.2f} | {s['all_in']:.2f} | {steps} |"
        )
    lines += ["", "| peer | $/M tasks | basis |", "| --- | ---: | --- |"]
    lines += [f"| {p['name']} | {p['dollars_per_million']:.2f} | {p['basis']} |" for p in cost["peers"]]
    lines += [
        "",
        f"Fixed: {cost['fixed_dollars_per_million_at_rate']:.3f} $/M at {est['rate']:g} tasks/s "
        f"({', '.join(f'{k} ${v * 2_592_000:.2f}/month' for k, v in cost['fixed_dollars_per_second'].items())}).",
    ]
    lines += ["", "![cost](cost.png)"]
    return "\n".join(lines)


def _sqs(results: dict[str, Any]) -> str:
    lines = ["## SQS requests per task under load", "", "| run | total | by call |", "| --- | ---: | --- |"]
    runs = {"throughput (backlog)": results["throughput"], **{f"start-lag {k}": v for k, v in results["lag"].items()}}
    for name, run in runs.items():
        calls = ", ".join(f"{k.split('.')[1]} {v:.3f}" for k, v in run["sqs_per_task"].items())
        lines.append(f"| {name} | {run['sqs_requests_per_task']:.3f} | {calls} |")
    return "\n".join(lines)


def _lag(lag: dict[str, Any]) -> str:
    lines = [
        "## Start-lag",
        "",
        "Each second one batch of tasks due `lead_s` later, spread evenly over that second, for `seconds`; "
        "lag = the executor's start record minus run_at.",
        "",
        "| run | rate/s | lookahead s | tasks | started | p50 ms | p95 ms | p99 ms | max ms | late batches "
        "| load avg |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for name, run in lag.items():
        q = run["lag_ms"]
        lines.append(
            f"| {name} | {run['rate']} | {run.get('lookahead_s', 1.0):g} | {run['scheduled']} | {run['started']} | "
            f"{_ms(q.get('p50'))} | "
            f"{_ms(q.get('p95'))} | {_ms(q.get('p99'))} | {_ms(q.get('max'))} | {run['late_submits']} | "
            f"{' '.join(str(x) for x in run['load'])} |"
        )
    lines += _tails(lag)
    lines += ["", "![start-lag histogram](start_lag_histogram.png)", "",
              "![start-lag over time](start_lag_over_time.png)"]  # fmt: skip
    return "\n".join(lines)


def _received(tail: dict[str, Any]) -> str:
    received = tail.get("received_after_due_and_send_ms")  # runs before receives were recorded have none
    return "" if received is None else f"received {received:+,.0f} and "


def _tails(lag: dict[str, Any]) -> list[str]:
    lines = ["", "Where the slowest 5% of each run spent their time (medians, ms; before run_at is negative):", ""]
    for name, run in lag.items():
        tail = run.get("slowest_5_percent") or {}
        if tail:
            lines.append(
                f"- {name}: consumer's send {tail['sent_minus_run_at_ms']:+,.0f}; {_received(tail)}claimed "
                f"{tail['claim_after_due_and_send_ms']:,.0f} after the later of run_at and that send; "
                f"start {tail['start_minus_claim_ms']:,.0f} after the claim ({tail['tasks']} tasks)"
            )
    return lines


def _throughput(run: dict[str, Any]) -> str:
    cpu = run["cpu_s_per_task"]
    framework = sum(v for k, v in cpu.items() if not k.startswith("embedded"))
    ceilings = ", ".join(f"{v:.1f}/s with {k} processes" for k, v in run["ceiling_per_s"].items())
    lines = [
        "## Throughput",
        "",
        f"{run['tasks']} no-op tasks due now, sent in batches of 100: {run['tasks_per_s']:.1f} tasks/s end to "
        f"end from the first request to the last callback ({run['seconds']:.1f} s; scheduling alone "
        f"{run['scheduling_per_s']:.1f}/s), **{run.get('steady_per_s', run['tasks_per_s']):.1f} tasks/s** once the "
        f"pipeline is full (between the 10th and the 90th percentile of completions). The same calls per task in "
        f"a raw loop against the same moto server: {ceilings}; ratio **{run['ratio']:.2f}** at the steady rate, "
        f"{run.get('ratio_whole_run', run['ratio']):.2f} over the whole run. "
        f"Load average at the end {' '.join(str(x) for x in run['load'])}.",
        "",
        "| component | CPU ms per task |",
        "| --- | ---: |",
    ]
    lines += [f"| {k} | {v * 1000:.2f} |" for k, v in cpu.items()]
    lines += [f"| framework total (all but moto) | {framework * 1000:.2f} |", "",
              "Calls per task: " + ", ".join(f"{k} {v:.3f}" for k, v in run["calls_per_task"].items()), "",
              *_peer(run), _polls(run), "", *_call_ms(run), "",
              "![throughput](throughput.png)"]  # fmt: skip
    return "\n".join(lines)


def _peer(run: dict[str, Any]) -> list[str]:
    """The framework and Celery side by side, on the same SQS server in the same run."""
    if not run.get("celery"):
        return []
    lines = ["### Side by side: Celery 5 on the same embedded SQS", "",
             "| system | tasks | steady tasks/s | end-to-end tasks/s | sending tasks/s |",
             "| --- | ---: | ---: | ---: | ---: |",
             f"| this framework | {run['tasks']} | **{run['steady_per_s']:.1f}** | {run['tasks_per_s']:.1f} | "
             f"{run['scheduling_per_s']:.1f} |"]  # fmt: skip
    for name, pool in run["celery"].items():
        lines.append(f"| Celery 5, SQS transport, {name} | {pool['tasks']} | **{pool['steady_per_s']:.1f}** | "
                     f"{pool['tasks_per_s']:.1f} | {pool['sending_per_s']:.1f} |")  # fmt: skip
    setup = _peer_setup(run)
    return [*lines, "", *setup, *([""] if setup else [])]


def _peer_setup(run: dict[str, Any]) -> list[str]:
    """What each side ran with: a comparison reads only as far as its settings go."""
    stack = run.get("stack") or {}
    pool = next(iter(run["celery"].values()))
    if "versions" not in pool:  # a run from before these were recorded
        return []
    versions = ", ".join(f"{name} {version}" for name, version in pool["versions"].items())
    options = ", ".join(f"{k} {v}" for k, v in pool["transport_options"].items()) or "defaults"
    return [
        f"This framework: one worker host of {stack.get('executors')} executors x {stack.get('threads')} threads, "
        f"long polls of {stack.get('receive_wait')} s. Celery: {versions}, one worker per pool, long polls "
        f"(kombu's default), transport options: {options}."
    ]


def _polls(run: dict[str, Any]) -> str:
    polls = run.get("consumer_polls") or {}
    if not polls.get("polls"):
        return "The consumer reported no polls that sent anything."
    # bench.throughput.consumer_polls joins sends less than half a second apart: a run may be several polls.
    return (
        f"The consumer's sends, from its history, in runs with no gap over 0.5 s (one poll or several back to "
        f"back; {polls['polls']} runs): at most {polls['max_tasks']:.0f} tasks in a run and at most "
        f"{polls['max_seconds']:.1f} s long, {polls['seconds_per_task'] * 1000:.0f} ms per task (its batch read, "
        "the sends of ten, and any enqueue writes with record_enqueued)." + _refused(polls, run["tasks"])
    )


def _refused(polls: dict[str, Any], tasks: int) -> str:
    if "rejected_enqueues" not in polls:
        return ""
    refused = polls["rejected_enqueues"]
    return (
        f" Enqueue writes refused because the task had moved on (billed all the same): {refused}, "
        f"{refused / max(1, tasks):.2f} per task."
    )


def _call_ms(run: dict[str, Any]) -> list[str]:
    lines = []
    for table, calls in (run.get("call_ms") or {}).items():
        timings = ", ".join(f"{k} {v:.1f}" for k, v in calls.items())
        lines.append(f"Milliseconds per call, one at a time against the same server, {table}: {timings}.")
    return lines


def _capacity(capacity: dict[str, Any]) -> str:
    lines = ["## Capacity model (bench/capacity.py)", ""]
    for design, plans in capacity["plans"].items():
        rates = [p["rate"] for p in plans]
        lines += [f"### {design}", "", "| | " + " | ".join(f"{r:,.0f} tasks/s" for r in rates) + " |",
                  "| --- |" + " ---: |" * len(rates)]  # fmt: skip
        for key in plans[0]["rows"]:
            cells = [f"{p['rows'][key]:,.2f}" if key == DOLLARS_ROW else _cell(p["rows"][key]) for p in plans]
            lines.append(f"| {key} | " + " | ".join(cells) + " |")
        for plan in plans:
            lines += [f"- at {plan['rate']:,.0f}/s: {note}" for note in plan["notes"]]
        lines.append("")
    built = capacity["designs"]["as built"]
    lines += ["Assumptions (as built; what the other designs change follows):", ""]
    lines += [f"- {k} = {v}" for k, v in built.items()]
    lines += ["", *_consumer_cpu(built), "", *_design_changes(capacity["designs"])]
    lines += ["", "Limits:", ""] + [f"- {k} = {v}" for k, v in capacity["limits"].items()]
    if "burst" in capacity:  # a results.json from before the worker services scaled has none
        lines += ["", *_burst(capacity["burst"])]
    if "million" in capacity:  # nor one from before the bounds were derived
        lines += ["", *_all_due_at_once(capacity["million"])]
    return "\n".join(lines)


def _consumer_cpu(built: dict[str, Any]) -> list[str]:
    """The consumer's CPU per task the groups are planned with, beside what this run measured."""
    planned, measured = built["consumer_cpu_s_per_task"], built.get("consumer_cpu_s_measured")
    told = "not measured in this run" if measured is None else f"{measured * 1000:.2f} ms measured (throughput step)"
    lines = [
        f"Consumer CPU per task: {planned * 1000:.2f} ms planned (atf_core.sizing.CONSUMER_CPU_S_PER_TASK, what "
        f"the CDK app sizes consumer groups with, and the groups above), {told}."
    ]
    if measured is not None and measured > planned:
        lines.append("**The measurement exceeds the plan: raise atf_core.sizing.CONSUMER_CPU_S_PER_TASK.**")
    return lines


def _design_changes(designs: dict[str, dict[str, Any]]) -> list[str]:
    """Each other design's assumptions that differ from as built's (the report lists only as built's)."""
    built = designs["as built"]
    lines = ["| design | assumption | as built | that design |", "| --- | --- | ---: | ---: |"]
    for design, fields in designs.items():
        lines += [f"| {design} | {k} | {_g(built[k])} | {_g(v)} |" for k, v in fields.items() if v != built[k]]
    return lines


def _g(value: Any) -> str:
    return f"{value:g}" if isinstance(value, int | float) else str(value)  # 0.0015 * 2.5 as 0.00375


def _all_due_at_once(million: dict[str, Any]) -> list[str]:
    stages = ", ".join(f"{name} {rate:,}/s" for name, rate in million["stage rates (tasks/s)"].items())
    return [
        f"### {million['tasks']:,} tasks due at the same second, on the stack sized for "
        f"{million['sized for (tasks/s)']:,.0f} tasks/s",
        "",
        f"The last starts {million['last start after due (s)']:g} s after they fall due (half of them by "
        f"{million['p50 start after due (s)']:g} s), paced by the {million['paced by']}.",
        f"Each stage flat out: {stages}.",
    ]


def _burst(burst: dict[str, Any]) -> list[str]:
    lag, a = burst["start-lag"], burst["assumptions"]
    lines = [f"### A burst of {a['tasks']:,} tasks due at one second: worker scaling with and without look-ahead",
             "", "| start-lag (s) | hosts ready at | p50 | p95 | p99 | last |", "| --- |" + " ---: |" * 5]  # fmt: skip
    for label in ("without look-ahead", "with look-ahead"):
        row = lag[label]
        lines.append(f"| {label} | {row['hosts ready at (s)']:g} | {row['p50']:g} | {row['p95']:g} | "
                     f"{row['p99']:g} | {row['max']:g} |")  # fmt: skip
    saved = (
        f"Saved: {lag['p95 start-lag saved (s)']:g} s at p95, {lag['last start saved (s)']:g} s for the last task; "
        f"{lag['hosts after scaling out']} hosts of {lag['per-host tasks/s']:g} tasks/s each after scaling out, "
        f"{lag['scale-out reaction (s)']:g} s from backlog to running hosts."
    )
    return [*lines, "", saved, "", "Assumptions (bench/capacity.py, BurstScaling):", ""] + [
        f"- {k} = {v}" for k, v in a.items()
    ]


def _cell(value: Any) -> str:
    if isinstance(value, dict):
        return " / ".join(f"{k} {v:,}" for k, v in value.items())
    return f"{value:,.0f}" if isinstance(value, int | float) else str(value)
