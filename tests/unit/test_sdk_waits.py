"""How long the SDK waits for a task is 0 or more seconds, as `atf status --wait` takes: a negative wait
would only time out ("still new after -1 s"), so it is refused naming the argument, before any request."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from atf_core.errors import InputError
from atf_sdk.async_client import AsyncAtfClient
from atf_sdk.client import AtfClient

NOWHERE = "http://127.0.0.1:9"  # nothing listens: an error other than InputError means a request was sent
TASK_ID = "0" * 32

WAITS: list[tuple[str, Callable[[Any], Any], str]] = [
    ("wait -1", lambda atf: atf.wait(TASK_ID, timeout_s=-1), "timeout_s"),
    ("wait NaN", lambda atf: atf.wait(TASK_ID, timeout_s=float("nan")), "timeout_s"),
    ("result -1", lambda atf: atf.result(TASK_ID, wait=-1), "wait"),
]


@pytest.mark.parametrize(("call", "argument"), [w[1:] for w in WAITS], ids=[w[0] for w in WAITS])
def test_a_negative_wait_is_refused_naming_the_argument(call: Callable[[Any], Any], argument: str) -> None:
    # Given a client; When it is asked to wait less than 0 s
    with AtfClient(NOWHERE) as atf, pytest.raises(InputError) as refused:
        call(atf)
    # Then it is refused, naming the argument, and nothing was sent
    assert refused.value.field == argument and refused.value.message.startswith(f"{argument}: ")


@pytest.mark.parametrize(("call", "argument"), [w[1:] for w in WAITS], ids=[w[0] for w in WAITS])
def test_the_async_client_refuses_it_alike(call: Callable[[Any], Any], argument: str) -> None:
    async def waited() -> None:
        async with AsyncAtfClient(NOWHERE) as atf:
            await call(atf)

    with pytest.raises(InputError) as refused:
        asyncio.run(waited())
    assert refused.value.field == argument
