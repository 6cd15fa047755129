"""The async task framework's SDK: the client, the lambdas' registry, the worker runtime and the CLI.

`from atf_sdk import AtfClient, Lambdas, TaskContext, Retry, Fatal` works with `pip install atf-sdk` alone;
the worker host (atf_sdk.worker.host) needs `atf-sdk[worker]`, the CLI's tables `atf-sdk[cli]`. Each name is
imported on first use: a worker process that imports its lambdas does not load the client, and the `atf` CLI,
which imports this package for its version, loads neither (the registry brings the core's pydantic models).
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from atf_sdk.client import AtfClient
    from atf_sdk.operations import TaskFailed
    from atf_sdk.worker.registry import Fatal, Lambdas, Retry, TaskContext

try:
    __version__ = version("atf-sdk")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

_LAZY = {
    "AtfClient": "atf_sdk.client",
    "TaskFailed": "atf_sdk.operations",
    **dict.fromkeys(("Fatal", "Lambdas", "Retry", "TaskContext"), "atf_sdk.worker.registry"),
}
__all__ = ["AtfClient", "Fatal", "Lambdas", "Retry", "TaskContext", "TaskFailed", "__version__"]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)
