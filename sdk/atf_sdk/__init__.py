"""The async task framework's SDK: worker runtime (and client, CLI)."""

from atf_sdk.worker.registry import Fatal, Lambdas, Retry, TaskContext

__all__ = ["Fatal", "Lambdas", "Retry", "TaskContext"]
