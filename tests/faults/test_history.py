"""A history made before its process forks: each process records as itself, into a file of its own.

A worker host's executors fork from a server that ran the start-up hook, so the wire recorder's History
they use was made in that server (atf_local.instruments.startup)."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

from atf_local.instruments.history import History


def _record_in_child(history: History) -> None:
    history.record("write", task="child")


def _pids_by_file(directory: Path) -> dict[str, list[int]]:
    return {
        path.name: [json.loads(line)["pid"] for line in path.read_text().splitlines()]
        for path in sorted(directory.glob("*.jsonl"))
    }


def test_a_forked_child_records_its_own_pid_into_its_own_file(tmp_path: Path) -> None:
    history = History(tmp_path, "wire")
    history.record("write", task="parent")  # the parent's file is open as it forks
    child = multiprocessing.get_context("fork").Process(target=_record_in_child, args=(history,))
    child.start()
    child.join(timeout=30)
    history.record("write", task="parent again")
    assert child.exitcode == 0
    parent = os.getpid()
    assert _pids_by_file(tmp_path) == {f"wire-{parent}.jsonl": [parent, parent], f"wire-{child.pid}.jsonl": [child.pid]}


def test_a_child_forked_while_another_thread_records_is_not_locked_out(tmp_path: Path) -> None:
    history = History(tmp_path, "wire")
    assert history._file is not None
    with history._file._lock:  # as if another thread were writing a record at the moment of the fork
        child = multiprocessing.get_context("fork").Process(target=_record_in_child, args=(history,))
        child.start()
    child.join(timeout=30)
    if child.exitcode is None:
        child.kill()
    assert child.exitcode == 0, "the child waited for a lock its parent held as it forked"
    assert _pids_by_file(tmp_path) == {f"wire-{child.pid}.jsonl": [child.pid]}
