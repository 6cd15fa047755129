"""Errors a caller can act on, each naming the field at fault.

The API answers bad input with these codes, and the SDK raises the same
classes for input it checks before sending, through `from_validation`: one
reading of pydantic's complaints for both, so a field is named alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from atf_core.schema import NameGivenTwice, not_as_expected


class AtfError(Exception):
    code = "error"
    status = 400

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def to_dict(self) -> dict[str, str | None]:
        return {"code": self.code, "message": self.message, "field": self.field}


class InputError(AtfError):
    code = "invalid_input"
    status = 400


class UnknownLambda(InputError):
    code = "unknown_lambda"


class UnknownPriority(InputError):
    code = "unknown_priority"


class NotFound(AtfError):
    code = "not_found"
    status = 404


class Conflict(AtfError):
    code = "conflict"
    status = 409


class FlowKeyBusy(Conflict):
    """A singleton flow key is held by another task that waits or runs (the message names it)."""

    code = "flow_key_busy"


# -- what the frontend API adds, shared with the SDK so callers catch the same classes --


class MalformedJson(InputError):
    code = "malformed_json"

    @classmethod
    def given_twice(cls, twice: NameGivenTwice, what: str, within: Sequence[str | int] = ()) -> MalformedJson:
        """`what` (the body, a line, a form's payload) gives a name twice: named by its place, inside `within`."""
        return cls(f"{what} is not valid JSON: {twice.msg}", field_path((*within, *twice.loc)))


class MissingField(InputError):
    code = "missing_field"


class UnknownField(InputError):
    code = "unknown_field"


class WrongType(InputError):
    code = "wrong_type"


class PayloadTooLarge(InputError):
    code = "payload_too_large"


class MissingAuthentication(AtfError):
    """The request is not signed, or not signed by credentials AWS knows (a wrong secret, an expired session)."""

    code = "missing_authentication"
    status = 403


class AccessDenied(AtfError):
    """The caller's IAM policies do not allow execute-api:Invoke on this route: API Gateway refused it, and the
    message names the caller, the action and the resource. Retrying will not help; a grant will."""

    code = "access_denied"
    status = 403


class UnsupportedMediaType(AtfError):
    code = "unsupported_media_type"
    status = 415


class Throttled(AtfError):
    code = "throttled"
    status = 429


class Unavailable(AtfError):
    code = "unavailable"
    status = 503


class Internal(AtfError):
    """The framework itself is at fault (say, its role lacks a grant): retrying will not help; its log says why."""

    code = "internal"
    status = 500


# -- pydantic's complaints as these errors ----------------------------------------------


def field_path(loc: Sequence[Any]) -> str | None:
    """('tasks', 3, 'priority') -> 'tasks[3].priority'."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or None


def from_validation(
    problems: Sequence[Mapping[str, Any]],
    where: Callable[[Sequence[Any]], str | None] = field_path,
    within: str | None = None,
) -> InputError:
    """The first problem, as the error class that names it; the message counts the rest.

    `where` turns a problem's location into a field name; `within` prefixes it
    (the SDK checks a batch's tasks one by one and names them as the API does: tasks[3]).
    """
    first = problems[0]
    kind = str(first.get("type", ""))
    # A check across a model's fields names the field at fault (atf_core.schema.refusal) within the model.
    loc = (*first.get("loc", ()), *(first.get("ctx") or {}).get("at", ()))
    field = where(loc) if kind != "json_invalid" else None
    if within is not None:
        field = f"{within}.{field}" if field else within
    error = _classify(kind, field, first)
    if len(problems) > 1:
        error.message += f" (and {len(problems) - 1} more problem{'s' if len(problems) > 2 else ''})"
    return error


def input_error(error: ValidationError, within: str | None = None) -> InputError:
    """A model's refusal of some input, as the API would answer it."""
    return from_validation(error.errors(include_url=False), within=within)


# The strict types of a request's numbers and flags (atf_core.schema.JsonInt, ...), by pydantic's error type.
JSON_TYPES = {
    "int_type": "a whole number",
    "float_type": "a number",
    "bool_type": "true or false",
    "string_type": "a string",
}


def _classify(kind: str, field: str | None, detail: Mapping[str, Any]) -> InputError:
    name = field or "body"
    message = str(detail.get("msg", "invalid")).removeprefix("Value error, ")
    if kind == "json_invalid":
        return MalformedJson(f"the body is not valid JSON: {detail.get('ctx', {}).get('error', message)}", None)
    if kind == "missing":
        return MissingField(f"{name} is required", name)
    if kind == "extra_forbidden":
        return UnknownField(f"{name} is not a known field", name)
    if kind == "payload_too_large":
        return PayloadTooLarge(f"{name}: {message}", name)
    if kind.startswith(("datetime", "date_", "time")):
        return InputError(f"{name}: {message}", name)  # an impossible time, not a wrong type
    if kind in JSON_TYPES:  # pydantic's words are Python's ("a valid integer"): say what JSON came instead
        return WrongType(f"{name}: {not_as_expected(JSON_TYPES[kind], detail.get('input'))}", name)
    wrong_json = kind in ("enum", "literal_error") and not isinstance(detail.get("input"), str)  # 1 for "pause"
    if wrong_json or kind.endswith(("_type", "_parsing")) or kind in ("model_attributes_type", "is_instance_of"):
        return WrongType(f"{name}: {message}", name)
    return InputError(f"{name}: {message}", name)


def _all_subclasses(cls: type[AtfError]) -> list[type[AtfError]]:
    found: list[type[AtfError]] = []
    for sub in cls.__subclasses__():
        found += [sub, *_all_subclasses(sub)]
    return found


_BY_STATUS: dict[int, type[AtfError]] = {
    403: MissingAuthentication,
    404: NotFound,
    409: Conflict,
    # API Gateway's answer to a request whose event is over Lambda's limit (atf_core.api.MAX_EVENT_BYTES)
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
    429: Throttled,
    502: Unavailable,
    503: Unavailable,
    504: Unavailable,
}


# API Gateway's refusals the deployed API reshapes into the frontend's error body (its GatewayResponses, by
# response type), with the codes of these classes and the field at fault: the CDK construct declares them
# and the local API server answers alike, so the SDK raises the same class whoever refused the request.
GATEWAY_REFUSALS: dict[str, tuple[type[AtfError], str | None]] = {
    "BAD_REQUEST_BODY": (InputError, "body"),
    "BAD_REQUEST_PARAMETERS": (InputError, "path"),
    "MISSING_AUTHENTICATION_TOKEN": (MissingAuthentication, None),
    "ACCESS_DENIED": (AccessDenied, None),
    "THROTTLED": (Throttled, None),
    "REQUEST_TOO_LARGE": (PayloadTooLarge, "body"),
    "DEFAULT_5XX": (Unavailable, None),
}
# How API Gateway words an IAM refusal ("User: ARN is not authorized to perform: execute-api:Invoke on ...")
_NOT_AUTHORIZED = " is not authorized to perform: "


def from_wire(status: int, body: dict[str, object]) -> AtfError:
    """The error an API response describes, as the class the server raised where one matches."""
    message = str(body.get("message") or body.get("Message") or f"HTTP {status}")
    field = body.get("field")
    if "code" in body:
        code = str(body["code"])
        known: list[type[AtfError]] = [AtfError, *_all_subclasses(AtfError)]
        cls = {c.code: c for c in known}.get(code, AtfError)
        if cls is MissingAuthentication and _NOT_AUTHORIZED in message:  # an API deployed before AccessDenied
            cls, code = AccessDenied, AccessDenied.code
    else:  # API Gateway's own refusals (auth, throttling, a failed invocation) carry only a message
        cls = AccessDenied if status == 403 and _NOT_AUTHORIZED in message else _BY_STATUS.get(status, AtfError)
        code = cls.code
    error = cls(message, str(field) if field is not None else None)
    if error.code != code or error.status != status:
        error.code, error.status = code, status  # keep what the server said even for codes this version lacks
    return error
