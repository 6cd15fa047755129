"""`atf status`'s table: what a row says of a task's failures."""

from __future__ import annotations

import pytest

from atf_core.schema import TaskError, TaskStatus
from atf_sdk.cli import _task_table
from tests.builders import NOW, a_task


def test_an_error_beside_a_success_names_the_attempt_it_came_from(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")  # one line a row
    # Given a task that succeeded on its third attempt, after a failed second
    failed = TaskError(type="RuntimeError", message="flaky", attempt=2, at=NOW)
    task = a_task(NOW, status=TaskStatus.SUCCESS, attempt=3, max_attempts=5, last_error=failed, errors=[failed])
    # When its row is printed
    _task_table([task])
    # Then the error is shown as the second attempt's, beside the success
    row = next(line for line in capsys.readouterr().out.splitlines() if "t1" in line)
    assert "success" in row and "3/5" in row and "attempt 2: RuntimeError: flaky" in row
