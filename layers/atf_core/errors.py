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
