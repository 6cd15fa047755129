"""Each component's AWS actions, derived from what the component is built from.

A component names its parts once, beside its composition root: functions/frontend/parts.py,
functions/consumer/parts.py and atf_sdk.worker.parts (the worker hosts). Each part declares the
actions it calls where it calls them (atf_core.calls), so a role holds exactly what its code calls:
no hand-kept list of actions to forget or to leave behind.

The functions ship as files (atf_cdk.sources), not as an installed package: their parts modules are
loaded from there, and import nothing but atf_core.
"""

from __future__ import annotations

import importlib.util
from functools import cache
from types import ModuleType
from typing import Literal

from atf_cdk.sources import functions_source
from atf_core.calls import Part, actions_of
from atf_sdk.worker.parts import PARTS as WORKER_PARTS

Component = Literal["frontend", "consumer", "worker"]
# The services a role is granted on: a part that calls another one needs a resource for it here first.
SERVICES = ("dynamodb", "sqs", "iam")


def _function_parts(name: str) -> tuple[Part, ...]:
    path = functions_source() / name / "parts.py"
    spec = importlib.util.spec_from_file_location(f"atf_cdk._parts_of_{name}", path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"no parts module for the {name} function at {path}")
    module: ModuleType = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return tuple(module.PARTS)


def parts(component: Component) -> tuple[Part, ...]:
    """What the component is built from, as its composition root names it."""
    return WORKER_PARTS if component == "worker" else _function_parts(component)


@cache
def actions(component: Component) -> frozenset[str]:
    """Every action the component's parts call."""
    found = actions_of(*parts(component))
    unknown = sorted(a for a in found if a.split(":")[0] not in SERVICES)
    if unknown:
        raise ValueError(f"the {component} calls {', '.join(unknown)}: atf_cdk grants no resource for that service")
    return found


def service_actions(component: Component, service: str) -> list[str]:
    """The component's actions on one service ("dynamodb", "sqs"), sorted: what its statement on it allows."""
    return sorted(a for a in actions(component) if a.startswith(f"{service}:"))
