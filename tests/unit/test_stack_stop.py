"""A local stack's stop runs to its end when a child outstays its time: the SQS server that did not end
within its wait raised TimeoutExpired, and the stack's IAM enforcement was never lifted."""

from __future__ import annotations

import subprocess
import sys

import pytest

from atf_core.config import StackConfig
from atf_local import stack as stack_module
from atf_local.stack import LocalStack
from tests.conftest import TEST_CONFIG

DEAF_TO_SIGTERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(flush=True); time.sleep(60)"
)


def test_a_child_that_ignores_sigterm_is_killed_and_the_stop_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a stack whose SQS server will not end when asked
    monkeypatch.setattr(stack_module, "STOP_WAIT_S", 0.3)
    stuck = subprocess.Popen([sys.executable, "-c", DEAF_TO_SIGTERM], stdout=subprocess.PIPE)
    assert stuck.stdout is not None and stuck.stdout.readline()  # its handler is in place
    lifted: list[bool] = []
    stack = LocalStack(StackConfig.model_validate(TEST_CONFIG), aws_port=1, api_port=None)
    stack._sqs, stack._unenforce = stuck, lambda: lifted.append(True)
    # When the stack stops
    stack.stop()
    # Then the server was killed, and what comes after it still ran
    assert stuck.returncode == -9 and lifted == [True]
