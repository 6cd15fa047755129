"""Errors a caller can act on, each naming the field at fault."""

from __future__ import annotations


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


# -- what the frontend API adds, shared with the SDK so callers catch the same classes --


class MalformedJson(InputError):
    code = "malformed_json"


class MissingField(InputError):
    code = "missing_field"


class UnknownField(InputError):
    code = "unknown_field"


class WrongType(InputError):
    code = "wrong_type"


class PayloadTooLarge(InputError):
    code = "payload_too_large"


class MissingAuthentication(AtfError):
    code = "missing_authentication"
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


def _all_subclasses(cls: type[AtfError]) -> list[type[AtfError]]:
    found: list[type[AtfError]] = []
    for sub in cls.__subclasses__():
        found += [sub, *_all_subclasses(sub)]
    return found


_BY_STATUS: dict[int, type[AtfError]] = {
    403: MissingAuthentication,
    404: NotFound,
    409: Conflict,
    415: UnsupportedMediaType,
    429: Throttled,
    502: Unavailable,
    503: Unavailable,
    504: Unavailable,
}


def from_wire(status: int, body: dict[str, object]) -> AtfError:
    """The error an API response describes, as the class the server raised where one matches."""
    message = str(body.get("message") or f"HTTP {status}")
    field = body.get("field")
    if "code" in body:
        code = str(body["code"])
        known: list[type[AtfError]] = [AtfError, *_all_subclasses(AtfError)]
        cls = {c.code: c for c in known}.get(code, AtfError)
    else:  # API Gateway's own refusals (auth, throttling, a failed invocation) carry only a message
        cls = _BY_STATUS.get(status, AtfError)
        code = cls.code
    error = cls(message, str(field) if field is not None else None)
    if error.code != code or error.status != status:
        error.code, error.status = code, status  # keep what the server said even for codes this version lacks
    return error
