"""atf-cdk: the async task framework's AWS infrastructure as a CDK construct library.

    from atf_cdk import AtfEnvironment, AtfProps, AtfStack, WorkerService, SecretRef, Scaling

AtfEnvironment (atf_cdk.environment) is the construct; AtfStack (atf_cdk.stack) a stack holding one;
AccountStack (atf_cdk.account) what an account holds once; atf_cdk.nag.check(app) runs cdk-nag.
Names are imported on first use: reading atf_cdk.sources does not load the CDK.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

# jsii prints a banner on Node releases it no longer supports; the value is the
# major version to stay quiet about, and must be set before aws_cdk is imported.
for _variable in ("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION"):
    os.environ.setdefault(_variable, "18,20")

if TYPE_CHECKING:
    from atf_cdk.account import AccountStack
    from atf_cdk.environment import ALL_LAMBDAS, AtfEnvironment, AtfProps
    from atf_cdk.options import ApiSettings, ConsumerSettings, NetworkSettings
    from atf_cdk.service import Scaling, SecretRef, WorkerService
    from atf_cdk.stack import AtfStack

_WHERE = {
    "AccountStack": "account",
    "ALL_LAMBDAS": "environment",
    "AtfEnvironment": "environment",
    "AtfProps": "environment",
    "ApiSettings": "options",
    "ConsumerSettings": "options",
    "NetworkSettings": "options",
    "Scaling": "service",
    "SecretRef": "service",
    "WorkerService": "service",
    "AtfStack": "stack",
}
__all__ = [
    "ALL_LAMBDAS",
    "AccountStack",
    "ApiSettings",
    "AtfEnvironment",
    "AtfProps",
    "AtfStack",
    "ConsumerSettings",
    "NetworkSettings",
    "Scaling",
    "SecretRef",
    "WorkerService",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
