"""The machine a run happened on: the figures mean little without it."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any


def describe(repo: Path) -> dict[str, Any]:
    meminfo = Path("/proc/meminfo").read_text().split("\n")[0].split()
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "cpu": _cpu_model(),
        "memory_gb": round(int(meminfo[1]) / 1024 / 1024, 1),
        "python": platform.python_version(),
        "moto": version("moto"),
        "boto3": version("boto3"),
        "os": f"{platform.system()} {platform.release()}",
        "commit": os.environ.get("BENCH_COMMIT") or _git(repo, "rev-parse", "--short", "HEAD"),
        "load_at_start": Path("/proc/loadavg").read_text().split()[:3],
        "cpu_s_for_5m_additions": _cpu_probe(),
    }


def _cpu_probe() -> float:
    """CPU seconds this Python takes for a fixed loop: scales the run's CPU figures to another machine."""
    started = time.process_time()
    total = 0
    for i in range(5_000_000):
        total += i
    return round(time.process_time() - started, 3)


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _git(repo: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)
        return done.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
