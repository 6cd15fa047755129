"""Which lambdas a worker host serves: those its module registers that the stack knows. One registered that
the stack does not know is not served, and the host says so, naming it (a misspelt or undeployed lambda
would otherwise never run, silently)."""

from __future__ import annotations

import logging

import pytest

from atf_core.config import StackConfig
from atf_sdk.worker.host import HostSettings, served_lambdas
from atf_sdk.worker.registry import Lambdas

lambdas = Lambdas()  # what this module registers, as a worker's module would
for _name in ("work", "mail", "typo_lambda"):
    lambdas.register(_name)(lambda task: None)

SPEC = f"{__name__}:lambdas"
STACK = StackConfig.model_validate({"name": "shop", "lambdas": {"work": {}, "mail": {}}})


def test_a_registered_lambda_the_stack_does_not_know_is_named_in_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    # Given a module registering work, mail and one the stack does not know
    # When the host works out what it serves
    with caplog.at_level(logging.WARNING, logger="atf.host"):
        served = served_lambdas(HostSettings(SPEC), STACK)
    # Then it serves the known ones and warns, naming the unknown one
    assert served == ["mail", "work"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "typo_lambda" in warnings[0] and "work" not in warnings[0].split("(")[0]


def test_nothing_is_said_when_only_narrows_what_is_served(caplog: pytest.LogCaptureFixture) -> None:
    # Given --only work; When the host works out what it serves; Then it serves that and warns of nothing
    with caplog.at_level(logging.WARNING, logger="atf.host"):
        assert served_lambdas(HostSettings(SPEC, only=("work",)), STACK) == ["work"]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
