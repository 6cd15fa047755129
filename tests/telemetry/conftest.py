"""Metrics are on in this package (the suite turns them off everywhere else) so EMF can be read back."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from atf_sdk.worker.observe import setup_logging


@pytest.fixture(autouse=True)
def metrics_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.delenv("POWERTOOLS_DEV", raising=False)


@pytest.fixture
def log_lines() -> Iterator[Callable[[], list[dict[str, Any]]]]:
    """The JSON lines a worker host's processes log (Powertools' format), as read back from their stream."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    stream = io.StringIO()
    setup_logging(stream=stream)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    root.handlers, root.level = saved[0], saved[1]
