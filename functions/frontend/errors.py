"""Every failure as a JSON body with a machine-readable code and the field at fault.

Powertools answers validation failures with a 422 and pydantic's details;
this API answers 400 with one of atf_core.errors' codes, so the SDK can raise
the same classes the core raises.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from json import JSONDecodeError
from typing import Any, NamedTuple

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)
from botocore.exceptions import ClientError

from atf_core.api import ErrorBody
from atf_core.aws import AUTHORIZATION_CODES, INVALID_REQUEST_CODE, THROTTLING_CODES
from atf_core.errors import (
    AtfError,
    InputError,
    Internal,
    MalformedJson,
    NotFound,
    Throttled,
    Unavailable,
    UnknownField,
    UnsupportedMediaType,
    WrongType,
)
from atf_core.errors import field_path as core_field_path
from atf_core.errors import from_validation as core_from_validation
from atf_core.schema import NameGivenTwice

JSON = "application/json"
METHODS_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})
# Path parameters are named for Python; callers know them by these names.
_PARAM_NAMES = {"task_id": "id", "chain_id": "id", "lambda_name": "lambda"}


def error_response(error: AtfError) -> Response[ErrorBody]:
    headers = {"Retry-After": "1"} if error.status in (429, 503) else {}
    body = ErrorBody(code=error.code, message=error.message, field=error.field)
    return Response(status_code=error.status, content_type=JSON, body=body.model_dump(), headers=headers)  # type: ignore[arg-type]


def field_path(loc: Sequence[Any]) -> str | None:
    """('body', 'tasks', 3, 'priority') -> 'tasks[3].priority'; ('path', 'task_id') -> 'id'."""
    parts = list(loc[1:]) if loc and loc[0] in ("body", "path", "query", "header") else list(loc)
    return core_field_path([part if isinstance(part, int) else _PARAM_NAMES.get(str(part), part) for part in parts])


def from_validation(errors: Sequence[Mapping[str, Any]]) -> InputError:
    """The first problem of a request, named as callers know its fields (see atf_core.errors)."""
    return core_from_validation(errors, where=field_path)


def media_type_error(
    method: str, headers: Mapping[str, str] | None, body: str | None = "-"
) -> UnsupportedMediaType | None:
    """Requests with a body must say it is JSON: a form or text body is refused, not guessed at.
    A POST with no body at all (pausing a schedule) has nothing to declare."""
    if method.upper() not in METHODS_WITH_BODY or not body:
        return None
    given = next((v for k, v in (headers or {}).items() if k.lower() == "content-type"), "")
    if given.split(";")[0].strip().lower() == JSON:
        return None
    return UnsupportedMediaType(f"Content-Type must be {JSON}, not {given or 'missing'}", "Content-Type")


def media_type_lowercased(event: dict[str, Any]) -> dict[str, Any]:
    """The event with its Content-Type's media type in lower case: media types are case-insensitive (RFC
    9110), and Powertools' validation takes only "application/json" as written (it answered
    `Application/JSON` with 415). The parameters (a charset, a boundary) are left as they came."""
    for headers in (event.get("headers") or {}, event.get("multiValueHeaders") or {}):
        for name, value in headers.items():
            if name.lower() == "content-type":
                headers[name] = [_lowercased(v) for v in value] if isinstance(value, list) else _lowercased(value)
    return event


def _lowercased(content_type: str) -> str:
    media_type, separator, parameters = content_type.partition(";")
    return media_type.strip().lower() + separator + parameters


def _undeclared_query(app: APIGatewayRestResolver) -> UnknownField | None:
    """A query parameter the route does not declare, refused like an unknown body field: a typo
    (`?colection=`) is not read as no filter."""
    route = app.context.get("_route")
    if route is None:
        return None
    declared = {param.alias for param in route.dependant.query_params}
    unknown = sorted(set(app.current_event.query_string_parameters or {}) - declared)
    return UnknownField(f"{unknown[0]} is not a query parameter of this route", unknown[0]) if unknown else None


def _count_not_in_digits(app: APIGatewayRestResolver) -> InputError | None:
    """A count in the query string (`limit`, `upcoming`) written other than in digits: pydantic's reading of a
    query string is lax, and took `1.0` as 1 and `1_0` as 10, where the body's counts (strict) are refused."""
    route = app.context.get("_route")
    given = app.current_event.query_string_parameters or {}
    for param in route.dependant.query_params if route is not None else ():
        value = given.get(param.alias)
        if param.type_ is int and value is not None and not (value.isascii() and value.isdigit()):
            return InputError(f"{param.alias}: must be a whole number written in digits", param.alias)
    return None


def _undeclared_body(app: APIGatewayRestResolver, body: dict[str, Any]) -> UnknownField | None:
    """A field in the body of a route that takes none (pausing a schedule): `{"x": 1}` is not read as nothing.
    A path no route matches (`/v1/schedules/a/b`) also runs the middleware, on Powertools' own not-found route,
    which declares no body: that is left to say "no route", not that the body is the problem."""
    route = app.context.get("_route")
    if not body or route is None or route.dependant.body_params or not _ours(route.func):
        return None
    field = sorted(body)[0]
    return UnknownField(f"{field}: this route takes no body", field)


def _ours(handler: Callable[..., Any]) -> bool:
    return handler.__module__.startswith(f"{__package__}.")


class _Refusal(NamedTuple):
    """A call AWS refuses for good: an operator (a grant) or a fix (the request) must act, not a retry."""

    log: str  # why, in the frontend's log next to the call and AWS's message
    caller: str  # what the caller is told


_REFUSED_FOR_GOOD = {
    **dict.fromkeys(
        AUTHORIZATION_CODES,
        _Refusal("missing permission", "the frontend is not allowed a call it needs; its log names the action"),
    ),
    # the framework asked something DynamoDB never takes
    INVALID_REQUEST_CODE: _Refusal(
        "an invalid request", "the task store refused a request the framework made; its log names the call"
    ),
}


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def from_client_error(error: ClientError) -> AtfError:
    code = _code(error)
    if code in _REFUSED_FOR_GOOD:
        return Internal(_REFUSED_FOR_GOOD[code].caller)
    if code in THROTTLING_CODES:
        return Throttled("the task store is throttling; retry with backoff")
    return Unavailable("the task store did not answer; retry with backoff")


class _Handlers:
    """The resolver's exception handlers; they read the current request from the resolver."""

    def __init__(self, app: APIGatewayRestResolver, logger: Logger) -> None:
        self._app = app
        self._logger = logger

    def _refused(self) -> UnsupportedMediaType | None:
        event = self._app.current_event
        return media_type_error(event.http_method, event.headers, event.body)

    def check_request(self, app: APIGatewayRestResolver, next_middleware: NextMiddleware) -> Response[Any]:
        refused = self._refused() or _undeclared_query(app) or _count_not_in_digits(app)
        if refused:
            return error_response(refused)
        # Powertools validates a JSON array body by its first element (a form-data
        # convenience); this API takes objects only. An empty body is left to the
        # route: a required one is then a missing_field.
        event = app.current_event
        if event.http_method.upper() not in METHODS_WITH_BODY or not event.body:
            return next_middleware(app)
        try:
            body = event.json_body  # read strictly (handler.py): NaN and the infinities are malformed
        except ValueError as error:  # a route's own validation says so first; a path no route matches does not
            return error_response(_malformed(error))
        if not isinstance(body, dict):
            return error_response(WrongType("the body must be a JSON object", "body"))
        unknown = _undeclared_body(app, body)
        return error_response(unknown) if unknown else next_middleware(app)

    def invalid(self, error: RequestValidationError) -> Response[ErrorBody]:
        # A form or text body fails validation before the middleware runs: say why. So does a JSON body the
        # strict reader refuses (Powertools' validation reads the body first).
        if isinstance(error.__cause__, JSONDecodeError):
            return error_response(self._refused() or _malformed(error.__cause__))
        return error_response(self._refused() or from_validation(list(error.errors())))

    def unsupported(self, error: RequestUnsupportedContentType) -> Response[ErrorBody]:
        return error_response(self._refused() or UnsupportedMediaType(str(error), "Content-Type"))

    def unparsable(self, error: ValueError) -> Response[ErrorBody]:
        # Powertools parses form and multipart bodies before any middleware runs, and
        # a malformed one (say, no multipart boundary) raises a bare ValueError.
        refused = self._refused()
        if refused is None:
            raise error
        return error_response(refused)

    def undecodable(self, error: Exception) -> Response[ErrorBody]:
        return error_response(MalformedJson(f"the body could not be decoded: {type(error).__name__}"))

    def no_route(self, error: NotFoundError) -> Response[ErrorBody]:
        event = self._app.current_event
        return error_response(NotFound(f"no route {event.http_method} {event.path}", "path"))

    def store_failed(self, error: ClientError) -> Response[ErrorBody]:
        refusal = _REFUSED_FOR_GOOD.get(_code(error))
        if refusal is not None:
            # An error for an operator, naming the call (AWS's message names the action or the problem).
            refused = {"operation": error.operation_name, "error": str(error)}
            self._logger.error(f"AWS refused a call: {refusal.log}", extra=refused)
        else:
            self._logger.warning("task store call failed", extra={"error": str(error)})
        return error_response(from_client_error(error))


def _malformed(error: ValueError) -> MalformedJson:
    """A body that is no JSON; where an object gives a name twice, naming its place (tasks[0].lambda)."""
    if isinstance(error, NameGivenTwice):
        return MalformedJson.given_twice(error, "the body")
    return MalformedJson(f"the body is not valid JSON: {error}")


def install(app: APIGatewayRestResolver, logger: Logger) -> None:
    """Register the exception handlers and the body checks on the resolver."""
    handlers = _Handlers(app, logger)
    app.use(middlewares=[handlers.check_request])
    app.exception_handler(AtfError)(error_response)
    app.exception_handler(RequestValidationError)(handlers.invalid)
    app.exception_handler(RequestUnsupportedContentType)(handlers.unsupported)
    app.exception_handler(ValueError)(handlers.unparsable)
    app.exception_handler([UnicodeDecodeError, RecursionError])(handlers.undecodable)
    app.not_found(handlers.no_route)
    app.exception_handler(ClientError)(handlers.store_failed)
