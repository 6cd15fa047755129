"""An API that takes connections and never answers (a hung proxy, a black-holed route): every call ends within
its retry budget, and a wait within its own time, instead of waiting out each attempt's read timeout."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator

import pytest

from atf_core.errors import Unavailable
from atf_sdk.async_client import AsyncAtfClient
from atf_sdk.cli import build_parser, main
from atf_sdk.client import AtfClient
from atf_sdk.commands.support import client as cli_client
from atf_sdk.operations import READ_AT_LEAST_S
from atf_sdk.transport import RetryPolicy


@pytest.fixture
def silent_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A listening socket nobody accepts from: the kernel completes each connection, and nothing answers."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "local")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(64)
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


def test_a_call_ends_within_its_retry_budget(silent_url: str) -> None:
    for _ in range(3):
        began = time.monotonic()
        with AtfClient(silent_url, timeout_s=0.5, retry=RetryPolicy(budget_s=2.0)) as atf, pytest.raises(Unavailable):
            atf.stats("work")
        assert time.monotonic() - began < 2.0 + 1.5  # before: every attempt's read timeout, 5 x 0.5 s plus pauses


def test_the_async_client_keeps_the_same_budget(silent_url: str) -> None:
    async def call() -> None:
        async with AsyncAtfClient(silent_url, timeout_s=0.5, retry=RetryPolicy(budget_s=2.0)) as atf:
            await atf.stats("work")

    began = time.monotonic()
    with pytest.raises(Unavailable):
        asyncio.run(call())
    assert time.monotonic() - began < 2.0 + 1.5


def test_a_wait_reads_within_its_own_time_not_each_attempts_read_timeout(silent_url: str) -> None:
    # Given the default 30 s read timeout, when a task is waited for 1 s, then the wait ends with the API unheard
    # after READ_AT_LEAST_S (a 1 s wait had taken 16 s with a 3 s timeout, 152 s with the default)
    began = time.monotonic()
    with AtfClient(silent_url) as atf, pytest.raises(Unavailable):
        atf.wait("0" * 32, timeout_s=1)
    assert time.monotonic() - began < READ_AT_LEAST_S + 1.5


def test_the_cli_takes_a_read_timeout_and_refuses_a_negative_wait(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["stats", "work", "--api-url", "http://127.0.0.1:9", "--api-timeout", "2.5"])
    assert cli_client(args).timeout_s == 2.5
    refused = (
        ["status", "x", "--wait", "-1"],
        ["stats", "w", "--api-timeout", "0"],
        ["chains", "get", "c", "--wait", "nan"],
    )
    for argv in refused:
        with pytest.raises(SystemExit) as exited:
            main([*argv, "--api-url", "http://127.0.0.1:9"])
        assert exited.value.code == 2, argv
    assert "--wait: -1 is not a number of seconds, 0 or more" in capsys.readouterr().err


def test_no_api_url_is_refused_naming_it_and_as_json_with_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ATF_API_URL", raising=False)
    for argv, json_out in ((["stats", "work"], False), (["--json", "schedules", "list"], True)):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        err = capsys.readouterr().err
        assert exited.value.code == 2 and err.count("\n") == 1, err
        if json_out:  # scripts that read --json's errors get the API's error object here too (it was plain text)
            assert json.loads(err) == {
                "code": "invalid_input",
                "message": json.loads(err)["message"],
                "field": "api_url",
            }
        else:
            assert err.startswith("atf: invalid_input: set ATF_API_URL") and err.endswith("(api_url)\n")
