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
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "cpu": _cpu_model(),
        "memory_gb": _memory_gb(),
        "python": platform.python_version(),
        "moto": version("moto"),
        "boto3": version("boto3"),
        "os": f"{platform.system()} {platform.release()}",
        "commit": os.environ.get("BENCH_COMMIT") or _git(repo, "rev-parse", "--short", "HEAD"),
        "load_at_start": load_average(),
        "cpu_s_for_5m_additions": _cpu_probe(),
    }


def load_average() -> list[float]:
    """The 1, 5 and 15-minute load averages (the machine is shared: each run records its own)."""
    return [round(x, 2) for x in os.getloadavg()]


def _memory_gb() -> float | None:
    try:  # the physical pages, as /proc/meminfo's MemTotal gives them but off Linux too
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3, 1)
    except (ValueError, OSError):
        return None


def _cpu_probe() -> float:
    """CPU seconds this Python takes for a fixed loop: scales the run's CPU figures to another machine."""
    started = time.process_time()
    total = 0
    for i in range(5_000_000):
        total += i
    return round(time.process_time() - started, 3)


def _cpu_model() -> str:
    try:  # Linux's /proc names the model; platform.processor() is often empty there
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _git(repo: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)
        return done.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
