"""Ids and names that go into a request's path are checked by the SDK before it sends anything: an empty one,
one with a "/", or "." or ".." (path steps to HTTP) would route elsewhere and come back as another route's
error (a 403 for no route, a not_found naming `path`), so it is refused as the API refuses a bad path
parameter, naming the field.

The client points at a port where nothing listens: an error other than InputError means it sent something.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from atf_core.errors import InputError
from atf_sdk.cli import main
from atf_sdk.client import AtfClient

NOWHERE = "http://127.0.0.1:9"
TASK_ID = "0" * 32
EVERY_MINUTE = {"lambda": "chore", "every_seconds": 60}

# (case, SDK call, the field the error names)
BAD_SEGMENTS: list[tuple[str, Callable[[AtfClient], Any], str]] = [
    ("get empty id", lambda a: a.get(""), "id"),
    ("get id with slash", lambda a: a.get("a/b"), "id"),
    ("cancel empty id", lambda a: a.cancel(""), "id"),
    ("change empty id", lambda a: a.change("", priority="high"), "id"),
    ("get under a bad lambda", lambda a: a.get(TASK_ID, lambda_name="a/b"), "lambda"),
    ("stats of an empty lambda", lambda a: a.stats(""), "lambda"),
    ("pause a collection with slash", lambda a: a.pause("work", "a/b"), "collection"),
    ("put schedule with slash", lambda a: a.put_schedule("a/b", EVERY_MINUTE), "name"),
    ("get empty schedule", lambda a: a.get_schedule(""), "name"),
    ("pause empty schedule", lambda a: a.pause_schedule(""), "name"),
    ("delete schedule with slash", lambda a: a.delete_schedule("a/b"), "name"),
    ("get empty chain", lambda a: a.get_chain(""), "id"),
    ("retry a link with slash", lambda a: a.retry_link(TASK_ID, "a/b"), "link"),
    # "." and ".." match the patterns, but HTTP resolves them as path steps: the request would reach no route
    ("put schedule .", lambda a: a.put_schedule(".", EVERY_MINUTE), "name"),
    ("get schedule ..", lambda a: a.get_schedule(".."), "name"),
    ("pause collection ..", lambda a: a.pause("work", ".."), "collection"),
    ("retry link .", lambda a: a.retry_link(TASK_ID, "."), "link"),
]


@pytest.mark.parametrize(("call", "field"), [c[1:] for c in BAD_SEGMENTS], ids=[c[0] for c in BAD_SEGMENTS])
def test_a_bad_path_segment_is_refused_before_sending_naming_its_field(
    call: Callable[[AtfClient], Any], field: str
) -> None:
    # Given a client of an API that is not there; When an id or name that is not one goes into the path
    with AtfClient(NOWHERE) as atf, pytest.raises(InputError) as refused:
        call(atf)
    # Then it is the API's refusal of a bad path parameter, naming the field, and nothing was sent
    assert (refused.value.code, refused.value.field) == ("invalid_input", field)
    says = refused.value.message
    assert says.startswith(f"{field}: String should match pattern") or "a step of a URL's path" in says, says


@pytest.mark.parametrize(
    "argv",
    [
        ["status", ""],
        ["cancel", "", "--yes"],
        ["chains", "get", ""],
        ["schedules", "get", ""],
        ["schedules", "get", ".."],
    ],
    ids=" ".join,
)
def test_the_cli_refuses_an_empty_id_as_a_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    # Given an empty id or name; When the verb runs
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--api-url", NOWHERE, "--json"])
    # Then it exits 2 (usage), naming the field, not 5 (missing authentication)
    err = capsys.readouterr().err
    assert exited.value.code == 2, err
    assert json.loads(err)["field"] in ("id", "name")
