"""Test helpers for a team's lambdas: eager mode for unit tests, the local stack for integration tests.

- `Eager` (atf_sdk.testing.eager) runs a registered callback in this process, as an executor would,
  and tells how the attempt ended: no AWS, no processes.
- `local_stack` and `worker_host` (atf_sdk.testing.stack) run the local stack and a worker host for
  your lambdas in processes of their own; the pytest plugin (atf_sdk.testing.plugin, loaded by pytest
  wherever atf-sdk is installed) makes them fixtures: atf_stack, atf_client, atf_async_client, atf_worker.

Names are imported on first use, so pytest loading the plugin costs a team nothing until a test asks.
See docs/testing.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from atf_sdk.testing.eager import AttemptResult, Eager, TaskFields
    from atf_sdk.testing.stack import RunningStack, RunningWorker, local_stack, worker_host

_WHERE = {
    "Eager": "eager",
    "AttemptResult": "eager",
    "TaskFields": "eager",
    "RunningStack": "stack",
    "RunningWorker": "stack",
    "local_stack": "stack",
    "worker_host": "stack",
}
__all__ = ["AttemptResult", "Eager", "RunningStack", "RunningWorker", "TaskFields", "local_stack", "worker_host"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
