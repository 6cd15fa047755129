"""One lambda's gates under /v1/lambdas/{lambda_name}/gates: pause or drop it, or one collection, and lift."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from atf_core.access import scoped
from atf_core.api import GateRequest
from atf_core.schema import Gate
from functions.frontend.openapi_doc import error_responses, ok
from functions.frontend.params import Collection, LambdaName
from functions.frontend.services import services

router = APIGatewayRouter()  # type: ignore[no-untyped-call]


@router.put(
    scoped("PUT", "/gates").resolver_path(),
    summary="Pause or drop this lambda",
    responses={**ok(200, "The gate in force", Gate), **error_responses(400, 409, 415)},
)
def gate_this_lambda(lambda_name: LambdaName, gate: Annotated[GateRequest, Body()]) -> Gate:
    return services().gating.set(lambda_name, None, gate.action, gate.until, gate.reason)


@router.put(
    scoped("PUT", "/gates/{collection}").resolver_path(),
    summary="Pause or drop one collection of this lambda",
    responses={**ok(200, "The gate in force", Gate), **error_responses(400, 409, 415)},
)
def gate_this_collection(lambda_name: LambdaName, collection: Collection, gate: Annotated[GateRequest, Body()]) -> Gate:
    return services().gating.set(lambda_name, collection, gate.action, gate.until, gate.reason)


@router.delete(
    scoped("DELETE", "/gates").resolver_path(),
    summary="Lift this lambda's gate",
    responses={204: {"description": "Lifted"}, **error_responses(400, 404)},
)
def lift_this_lambda_gate(lambda_name: LambdaName) -> Response[None]:
    services().gating.lift(lambda_name, None)
    return Response(status_code=204)


@router.delete(
    scoped("DELETE", "/gates/{collection}").resolver_path(),
    summary="Lift the gate of one collection of this lambda",
    responses={204: {"description": "Lifted"}, **error_responses(400, 404)},
)
def lift_this_collection_gate(lambda_name: LambdaName, collection: Collection) -> Response[None]:
    services().gating.lift(lambda_name, collection)
    return Response(status_code=204)
