"""`make run`'s demo stops what it started however it ends: a worker host that never reports ready left the
host and the stack running (their start and the wait were outside the teardown)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from atf_core.config import StackConfig
from atf_local import demo
from tests.conftest import TEST_CONFIG


class _Stack:
    def __init__(self, *_: Any, **__: Any) -> None:
        self.endpoint, self.api_url, self.console_url = "http://127.0.0.1:1", "http://127.0.0.1:2", None
        self.events: list[str] = []
        _Stack.made = self

    made: _Stack

    def start(self) -> None:
        self.events.append("started")

    def stop(self) -> None:
        self.events.append("stopped")


class _Host:
    pid = 1

    def __init__(self) -> None:
        self.signals: list[int] = []

    def send_signal(self, number: int) -> None:
        self.signals.append(number)

    def wait(self, timeout: float) -> int:
        return 0


def test_a_host_that_never_reports_ready_is_stopped_and_so_is_the_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a worker host that never reports ready
    host = _Host()
    monkeypatch.setattr(demo, "LocalStack", _Stack)
    monkeypatch.setattr(demo, "freeze_survivors", lambda: None)
    monkeypatch.setattr(demo, "_start_worker_host", lambda stack, log: host)

    def never_ready(log: Path, needle: str, timeout_s: float) -> None:
        raise TimeoutError(f"{needle!r} did not appear in {log}")

    monkeypatch.setattr(demo, "_wait_for_line", never_ready)
    # When the demo runs, it fails with the wait's error
    with pytest.raises(TimeoutError):
        demo.run_demo(StackConfig.model_validate(TEST_CONFIG), aws_port=1, api_port=2)
    # Then the host was asked to stop, and the stack stopped
    assert host.signals == [demo.signal.SIGTERM]
    assert _Stack.made.events == ["started", "stopped"]
