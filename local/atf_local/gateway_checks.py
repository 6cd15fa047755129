"""What the deployed API Gateway refuses before authorization's result even matters, or before the function
is called, and so the local API server must refuse alike (infra/atf_cdk/constructs/frontend.py builds both):

- a method and path that are not one of its routes (atf_core.access: ROUTES, the OpenAPI document's, and
  the DOCUMENT itself): 403 "Missing Authentication Token", signed or not, as API Gateway answers for a
  resource or method it lacks;
- a POST or PUT whose JSON body is not a JSON object: its request validator checks every such body against
  the model `{"type": "object"}`, 400 "Invalid request body" (an empty body is validated as `{}`; a body of
  another content type has no model and goes through, for the function to refuse).

Both answer in the frontend's error shape, as the deployed API's GatewayResponses reshape them.
"""

from __future__ import annotations

import re

from atf_core.access import DOCUMENT, ROUTES, WITH_BODY
from atf_core.schema import decode_json
from atf_local.gateway_auth import MISSING, Headers, Refusal

_PARAMETER = re.compile(r"^\{[a-z_]+\}$")
# (method, path) of every route the deployed API has (tests/infra checks them against the template's methods)
KNOWN_ROUTES = frozenset({DOCUMENT, *((route.method, route.path) for route in ROUTES)})
_TEMPLATES = [(method, path.strip("/").split("/")) for method, path in KNOWN_ROUTES]


def unknown_route(method: str, path: str) -> Refusal | None:
    """API Gateway's refusal of a method and path none of its routes match (`path` as sent, not decoded)."""
    segments = path.strip("/").split("/")
    for known_method, template in _TEMPLATES:
        if known_method == method.upper() and _matches(template, segments):
            return None
    return Refusal("MISSING_AUTHENTICATION_TOKEN", "MissingAuthenticationTokenException", MISSING)


def _matches(template: list[str], segments: list[str]) -> bool:
    return len(template) == len(segments) and all(
        (bool(segment) if _PARAMETER.match(part) else part == segment)
        for part, segment in zip(template, segments, strict=True)
    )


def invalid_body(method: str, headers: Headers, body: bytes) -> Refusal | None:
    """The request validator's refusal of a JSON body that is not a JSON object."""
    media_type = str(headers.get("Content-Type") or "application/json").split(";")[0].strip().lower()
    if method.upper() not in WITH_BODY or media_type != "application/json" or not body:
        return None
    try:
        # API Gateway's validator reads JSON strictly (NaN is no JSON value). What it does with a name given twice
        # is not documented: it is left to the function here, which refuses it (either way the request is refused)
        parsed = decode_json(body, unique_names=False)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        return None
    return Refusal("BAD_REQUEST_BODY", "BadRequestException", "Invalid request body", status=400)
