"""PNG figures of one run (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after choosing the backend


def lag_histogram(runs: dict[str, dict[str, Any]], path: Path) -> None:
    figure, axes = plt.subplots(1, len(runs), figsize=(6 * len(runs), 4), squeeze=False)
    for axis, (label, run) in zip(axes[0], runs.items(), strict=True):
        lags = run["lags_ms"]
        if lags:
            axis.hist(lags, bins=60, color="#3b7dd8")
        for q, style in (("p95", "--"), ("p99", ":")):
            value = run["lag_ms"].get(q)
            if value is not None:
                axis.axvline(value, color="black", linestyle=style, label=f"{q} {value:,.0f} ms")
        axis.set_title(f"{label}: {run['started']}/{run['scheduled']} started")
        axis.set_xlabel("start - run_at (ms)")
        axis.set_ylabel("tasks")
        if axis.get_legend_handles_labels()[0]:
            axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def lag_over_time(runs: dict[str, dict[str, Any]], path: Path) -> None:
    figure, axis = plt.subplots(figsize=(9, 4))
    for label, run in runs.items():
        pairs = run["run_at_lags"]
        if pairs:
            start = pairs[0][0]
            axis.scatter([t - start for t, _ in pairs], [lag for _, lag in pairs], s=4, label=label)
    axis.set_xlabel("run_at, seconds into the feed")
    axis.set_ylabel("start-lag (ms)")
    axis.set_yscale("symlog", linthresh=100)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def throughput_timeline(run: dict[str, Any], path: Path) -> None:
    figure, axis = plt.subplots(figsize=(9, 4))
    axis.plot([t for t, _ in run["submitted"]], [n for _, n in run["submitted"]], label="scheduled (API)")
    for key, label in (("started_at", "started"), ("completed_at", "completed")):
        times = run[key]
        axis.plot(times, range(1, len(times) + 1), label=label)
    axis.set_xlabel("seconds")
    axis.set_ylabel("tasks")
    ceiling = max(run["ceiling_per_s"].values())
    axis.set_title(f"{run['tasks_per_s']:.1f} tasks/s end to end; backend ceiling {ceiling:.1f} tasks/s")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def cost_bars(cost: dict[str, Any], path: Path) -> None:
    names = [s["name"] for s in cost["scenarios"]] + [p["name"] for p in cost["peers"]]
    values = [s["dollars_per_million"] for s in cost["scenarios"]] + [p["dollars_per_million"] for p in cost["peers"]]
    colors = ["#3b7dd8"] * len(cost["scenarios"]) + ["#999999"] * len(cost["peers"])
    figure, axis = plt.subplots(figsize=(9, 4))
    axis.barh(names[::-1], values[::-1], color=colors[::-1])
    axis.set_xscale("log")
    axis.set_xlabel("dollars per million tasks (DynamoDB + SQS for ATF; list price for peers)")
    for y, value in enumerate(values[::-1]):
        axis.text(value, y, f" ${value:.2f}", va="center")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
