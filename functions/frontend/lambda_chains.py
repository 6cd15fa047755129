"""One lambda's chains under /v1/lambdas/{lambda_name}/chains: chains whose every link runs this lambda.
A chain whose links run several lambdas is created and steered through the all-lambdas /v1/chains routes."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from atf_core.access import scoped
from atf_core.api import LinkRetry
from atf_core.chains import ChainSpec, ChainView
from functions.frontend.chains import create
from functions.frontend.openapi_doc import error_responses, ok
from functions.frontend.ownership import same_lambda
from functions.frontend.params import ChainId, LambdaName, LinkName
from functions.frontend.services import services

router = APIGatewayRouter()  # type: ignore[no-untyped-call]


@router.post(
    scoped("POST", "/chains").resolver_path(),
    summary="Create a chain whose every link runs this lambda",
    responses={
        **ok(201, "Created", ChainView),
        **ok(200, "An earlier request with this key made it", ChainView),
        **error_responses(400, 409, 415),
    },
)
def create_lambda_chain(lambda_name: LambdaName, spec: Annotated[ChainSpec, Body()]) -> Response[ChainView]:
    for index, link in enumerate(spec.links):
        same_lambda(lambda_name, link.lambda_, f"links[{index}].lambda")
    return create(spec)


@router.get(
    scoped("GET", "/chains/{chain_id}").resolver_path(),
    summary="A chain of this lambda: its status and each link's task, state and attempt",
    responses={**ok(200, "The chain", ChainView), **error_responses(400)},
)
def get_lambda_chain(lambda_name: LambdaName, chain_id: ChainId) -> ChainView:
    return services().chains.get(chain_id, lambda_name=lambda_name)


@router.delete(
    scoped("DELETE", "/chains/{chain_id}").resolver_path(),
    summary="Cancel every link of a chain of this lambda that has not started",
    responses={**ok(200, "The chain after cancelling", ChainView), **error_responses(400)},
)
def cancel_lambda_chain(lambda_name: LambdaName, chain_id: ChainId) -> ChainView:
    return services().chains.cancel(chain_id, lambda_name=lambda_name)


@router.post(
    scoped("POST", "/chains/{chain_id}/links/{link}/retry").resolver_path(),
    summary="Run a failed link of a chain of this lambda again",
    responses={**ok(200, "The chain after the retry", ChainView), **error_responses(400, 409, 415)},
)
def retry_lambda_link(
    lambda_name: LambdaName, chain_id: ChainId, link: LinkName, retry: Annotated[LinkRetry | None, Body()] = None
) -> ChainView:
    return services().chains.retry(chain_id, link, retry.budget if retry else None, lambda_name=lambda_name)
