"""Metrics are on in this package (the suite turns them off everywhere else) so EMF can be read back."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def metrics_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.delenv("POWERTOOLS_DEV", raising=False)
