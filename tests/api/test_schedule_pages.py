"""The schedules' list answers a page at a time: by name, up to `limit`, and never more than the frontend's
Lambda response holds (6 MiB: atf_core.api.MAX_EVENT_BYTES), however large their payloads; `next` leads on.
The SDK and the CLI read every page."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from atf_core.api import MAX_EVENT_BYTES, in_an_event
from atf_sdk.client import AtfClient
from tests.api.conftest import Raw

YEARLY = {"lambda": "chore", "cron": "0 3 1 1 *"}  # the quiet stack fires nothing; this would not either


def _prefix() -> str:
    return f"p-{uuid.uuid4().hex[:8]}-"


@pytest.fixture
def put(client: AtfClient) -> Iterator[Any]:
    """Put schedules; delete them all after the test (the package's stack is shared)."""
    names: list[str] = []

    def put_one(name: str, spec: dict[str, Any]) -> None:
        client.put_schedule(name, spec)
        names.append(name)

    yield put_one
    for name in names:
        client.delete_schedule(name)


def _pages(raw: Raw, path: str, **query: Any) -> Iterator[dict[str, Any]]:
    """Every page of a list, following `next`; each checked to be an answer Lambda returns."""
    after = None
    while True:
        params = "&".join(f"{k}={v}" for k, v in {**query, "after": after}.items() if v is not None)
        reply = raw("GET", f"{path}?{params}" if params else path)
        assert reply.status == 200, reply.body
        yield reply.body
        if reply.body["next"] is None:
            return
        assert reply.body["next"] == reply.body["schedules"][-1]["name"]
        after = reply.body["next"]


def test_pages_follow_one_another_by_name_each_up_to_its_limit(raw: Raw, put: Any) -> None:
    prefix = _prefix()
    for n in (3, 0, 4, 1, 2):  # put out of order: the list is by name
        put(f"{prefix}{n}", YEARLY)

    pages = list(_pages(raw, "/v1/schedules", limit=2))

    names = [s["name"] for page in pages for s in page["schedules"]]
    assert all(len(page["schedules"]) <= 2 for page in pages) and pages[-1]["next"] is None
    assert names == sorted(set(names)), "in order, none twice"
    assert [n for n in names if n.startswith(prefix)] == [f"{prefix}{n}" for n in range(5)]


def test_a_lambdas_pages_hold_its_schedules_only(raw: Raw, put: Any, client: AtfClient) -> None:
    prefix = _prefix()
    for n in range(4):
        put(f"{prefix}{n}", {**YEARLY, "lambda": "chore" if n % 2 else "mail"})

    for path in ("/v1/lambdas/chore/schedules", "/v1/schedules?lambda=chore"):
        base, _, query = path.partition("?")
        pages = list(_pages(raw, base, limit=1, **dict([query.split("=")] if query else [])))
        listed = [s for page in pages for s in page["schedules"]]
        assert all(s["spec"]["lambda"] == "chore" for s in listed)
        assert [s["name"] for s in listed if s["name"].startswith(prefix)] == [f"{prefix}1", f"{prefix}3"]
    assert [s.name for s in client.schedules("mail") if s.name.startswith(prefix)] == [f"{prefix}0", f"{prefix}2"]


# Payloads whose answer grows most, near the 256 KiB a payload may take as UTF-8: quotes (2 bytes there, 4 in
# the answer: escaped in the body, and again in the response) and 'é' (2 bytes there, 7 in the answer: a \u
# escape in the body, its backslash escaped again).
LARGE = [{"x": '"' * 130_000}, {"x": "é" * 130_000}]


def test_schedules_of_full_payloads_come_in_pages_a_lambda_response_holds(
    raw: Raw, put: Any, client: AtfClient
) -> None:
    prefix = _prefix()
    for n in range(24):  # ~17 MB in one answer, as the list was before it had pages
        put(f"{prefix}{n:02}", {**YEARLY, "payload": {**LARGE[n % 2], "n": n}})

    pages = list(_pages(raw, "/v1/schedules"))

    assert len(pages) >= 3
    for page in pages:
        assert in_an_event(json.dumps(page)) < MAX_EVENT_BYTES
    mine = [s for page in pages for s in page["schedules"] if s["name"].startswith(prefix)]
    assert [s["spec"]["payload"]["n"] for s in mine] == list(range(24))
    listed = [s for s in client.schedules() if s.name.startswith(prefix)]
    assert [s.spec.payload for s in listed] == [{**LARGE[n % 2], "n": n} for n in range(24)]


@pytest.mark.parametrize(
    ("query", "field"),
    [("limit=0", "limit"), ("limit=101", "limit"), ("limit=two", "limit"), ("after=a%20b", "after")],
)
def test_a_bad_page_query_is_a_400_naming_it(raw: Raw, query: str, field: str) -> None:
    reply = raw("GET", f"/v1/schedules?{query}")
    assert (reply.status, reply.body["field"]) == (400, field)
