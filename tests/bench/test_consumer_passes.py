"""The consumer benchmark's harness, on a few tasks: both runs send every task once and report their figures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from atf_local.environment import DUMMY_CREDENTIALS
from bench.consumer_passes import run_consumer_passes, summary


def test_a_short_run_sends_every_task_once_sequentially_and_overlapped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in DUMMY_CREDENTIALS.items():
        monkeypatch.setenv(key, os.environ.get(key, value))
    result = run_consumer_passes(tmp_path, tasks=200, shards=40, per_pass=100)
    for name, threads in (("before", 1), ("after", 4)):
        run = result[name]
        assert run["io_threads"] == threads
        assert run["tasks"] == 200 and len(run["passes"]) == 2
        assert run["tasks_per_s"] > 0 and run["cpu_ms_per_task"] > 0
    assert "speedup" in summary(result)
