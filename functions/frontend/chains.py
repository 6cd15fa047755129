"""Chains under /v1/chains: create, read as one unit, cancel the rest, retry a failed link."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from atf_core.access import route
from atf_core.api import LinkRetry
from atf_core.chains import ChainSpec, ChainView
from atf_core.clock import process_clock
from atf_core.schema import from_ms, to_ms
from functions.frontend.metrics import count_scheduled
from functions.frontend.openapi_doc import JSON, error_responses, ok
from functions.frontend.params import ChainId, LinkName
from functions.frontend.services import services
from functions.frontend.spanning import require_each

router = APIGatewayRouter()  # type: ignore[no-untyped-call]


@router.post(
    "/v1/chains",
    summary="Create a chain: every link a task, each started when all the links it is after have succeeded",
    responses={
        **ok(201, "Created", ChainView),
        **ok(200, "An earlier request with this key made it", ChainView),
        **error_responses(400, 409, 415),
    },
)
def create_chain(spec: Annotated[ChainSpec, Body()]) -> Response[ChainView]:
    links = [(f"links[{i}].lambda", link.lambda_) for i, link in enumerate(spec.links)]
    require_each(route("POST", "/v1/chains"), router.current_event, links)
    return create(spec)


def create(spec: ChainSpec) -> Response[ChainView]:
    """201 with the chain made, or 200 with the one an earlier request with its key made."""
    now = from_ms(to_ms(process_clock()))  # as the chain stores it
    view = services().chains.create(spec, now=now)
    # A chain found by its key keeps the creation time of the request that made it.
    created = view.created_at == now
    if created:
        count_scheduled([link.lambda_ for link in spec.links])
    return Response(status_code=201 if created else 200, content_type=JSON, body=view)


@router.get(
    "/v1/chains/<chain_id>",
    summary="A chain's status and each link's task, state and attempt",
    responses={**ok(200, "The chain", ChainView), **error_responses(400)},
)
def get_chain(chain_id: ChainId) -> ChainView:
    return services().chains.get(chain_id)


@router.delete(
    "/v1/chains/<chain_id>",
    summary="Cancel every link that has not started (running links finish)",
    responses={**ok(200, "The chain after cancelling", ChainView), **error_responses(400)},
)
def cancel_chain(chain_id: ChainId) -> ChainView:
    return services().chains.cancel(chain_id)


@router.post(
    "/v1/chains/<chain_id>/links/<link>/retry",
    summary="Run a failed (dead-letter) link again with a fresh attempt budget; the chain carries on after it",
    responses={**ok(200, "The chain after the retry", ChainView), **error_responses(400, 409, 415)},
)
def retry_link(chain_id: ChainId, link: LinkName, retry: Annotated[LinkRetry | None, Body()] = None) -> ChainView:
    return services().chains.retry(chain_id, link, retry.budget if retry else None)
