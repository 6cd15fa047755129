"""Requests that span lambdas (POST /v1/tasks/batch, POST /v1/chains): each item's lambda checked against
the caller's identity before anything is written (atf_core.item_access), the whole request refused naming
the first lambda IAM does not allow.

IAM let the caller call the spanning route for a grant of its kind on at least one lambda
(atf_core.access.grant_patterns); here each item must pass as the same request to its scoped twin
(/v1/lambdas/{item's lambda}/...) would have passed API Gateway. The twin's ARN is built from the request
context: arn:{partition}:execute-api:{region}:{account}:{api id}/{stage}/{METHOD}/{twin's path}, the
partition the caller's own ARN names (IAM authenticated it in the API's account, so in its partition).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from aws_lambda_powertools.utilities.data_classes.api_gateway_proxy_event import APIGatewayProxyEvent

from atf_core.access import Route
from atf_core.errors import AccessDenied
from functions.frontend.services import services


def require_each(route: Route, event: APIGatewayProxyEvent, lambdas: Sequence[tuple[str, str]]) -> None:
    """Refuse (AccessDenied, naming the field, the lambda and the permission) unless the caller may call the
    route's twin for every (field, lambda) given. Lambdas the configuration lacks are left to validation
    (400 naming the field): nothing can be written for them."""
    found = services()
    known = [(field, name) for field, name in lambdas if name in found.config.lambdas]
    twin = route.twin()
    context = event.request_context
    caller = context.identity.user_arn
    api = f"{context.account_id}:{context.api_id}/{context.stage}/{twin.method}"
    base = f"arn:{partition_of(caller)}:execute-api:{_region()}:{api}"
    arns = {name: base + twin.build(lambda_name=name) for _, name in known}
    refused = found.item_access.refused(caller, arns.values())
    for field, name in known:
        if arns[name] in refused:
            raise AccessDenied(
                f"User: {caller} is not authorized to perform: execute-api:Invoke on resource: {arns[name]}"
                f" ({route.kind} on lambda {name!r}, {refused[arns[name]]})",
                field,
            )


def partition_of(caller_arn: str | None) -> str:
    """aws, aws-cn or aws-us-gov: the second field of the caller's ARN."""
    fields = (caller_arn or "").split(":")
    return fields[1] if len(fields) > 2 and fields[0] == "arn" and fields[1] else "aws"


def _region() -> str:
    """The function's region: the API's (a regional API calls a function of its own region)."""
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
