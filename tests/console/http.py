"""The console over plain HTTP, as a script would post its forms: each call checks the status it expects."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from http import HTTPStatus

from tests.console.conftest import ConsoleStack


def get(stack: ConsoleStack, path: str, status: int = HTTPStatus.OK) -> str:
    return _answer(urllib.request.Request(f"{stack.console}{path}"), status)


def post(stack: ConsoleStack, path: str, form: dict[str, str], status: int = HTTPStatus.OK) -> str:
    """A form posted from the console's own page (its Origin); a redirect is followed to the page it names."""
    data = urllib.parse.urlencode(form).encode()
    return _answer(
        urllib.request.Request(f"{stack.console}{path}", data=data, headers={"Origin": stack.console}), status
    )


def _answer(request: urllib.request.Request, status: int) -> str:
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            answered, body = reply.status, reply.read().decode()
    except urllib.error.HTTPError as refused:
        answered, body = refused.code, refused.read().decode()
    assert answered == status, f"{request.get_method()} {request.full_url}: {answered}, not {status}\n{body[-2000:]}"
    return body
