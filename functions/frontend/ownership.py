"""What a route scoped to one lambda (/v1/lambdas/{lambda_name}/...) may see: only that lambda's things.

IAM granted the caller the lambda of the path, not the task, schedule or chain an id names: the core checks
it in the read it makes anyway (Scheduling and Chains take `lambda_name=`, PeriodicSchedules `owner=`, and a
write conditions on what that read found). One that belongs to another lambda is answered exactly as one
that does not exist (404), so a scoped caller learns nothing of other lambdas; a body naming another lambda
is refused (400, naming the field).
"""

from __future__ import annotations

from atf_core.errors import InputError


def same_lambda(lambda_name: str, given: str | None, field: str = "lambda") -> str:
    """The path's lambda, when the body names the same one or none."""
    if given is not None and given != lambda_name:
        raise InputError(f"{field}: {given!r}, but the path is lambda {lambda_name!r}", field)
    return lambda_name
