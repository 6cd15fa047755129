"""Bad input through the SDK and the CLI: the error the API would answer (an atf_core.errors class with
its code and the field at fault), never pydantic's bare ValidationError, and nothing written."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from atf_core.errors import AtfError, InputError, WrongType
from atf_local.stack import LocalStack
from atf_sdk.cli import main
from atf_sdk.client import AtfClient
from tests.api.test_errors import TOO_DEEP

NOT_OBJECTS = [[], "", 0, [1], "x", False]
EVERY_SECOND = {"lambda": "chore", "every_seconds": 60}


def _link(payload: Any) -> dict[str, Any]:
    return {"links": [{"name": "a", "lambda": "chore", "payload": payload}]}


# Every way a payload enters through the SDK: (surface, call, the field the error names)
SDK_SURFACES: list[tuple[str, Callable[[AtfClient, Any], Any], str]] = [
    ("schedule", lambda atf, p: atf.schedule("work", p), "payload"),
    ("submit", lambda atf, p: atf.submit({"lambda": "work", "payload": p}), "payload"),
    (
        "schedule_many",
        lambda atf, p: atf.schedule_many([{"lambda": "work"}, {"lambda": "work", "payload": p}]),
        "tasks[1].payload",
    ),
    ("put_schedule", lambda atf, p: atf.put_schedule("never", {**EVERY_SECOND, "payload": p}), "payload"),
    ("create_chain", lambda atf, p: atf.create_chain(_link(p)), "links[0].payload"),
]


@pytest.mark.parametrize("payload", NOT_OBJECTS, ids=repr)
@pytest.mark.parametrize(("call", "field"), [s[1:] for s in SDK_SURFACES], ids=[s[0] for s in SDK_SURFACES])
def test_the_sdk_refuses_a_payload_that_is_not_an_object(
    client: AtfClient, item_count: Any, call: Callable[[AtfClient, Any], Any], field: str, payload: Any
) -> None:
    before = item_count()
    with pytest.raises(WrongType) as caught:
        call(client, payload)
    assert (caught.value.code, caught.value.field) == ("wrong_type", field)
    assert "must be a JSON object" in caught.value.message and field in caught.value.message
    assert item_count() == before


# The same through the API: (surface, method, path, body for a payload, the field named)
API_SURFACES: list[tuple[str, str, str, Callable[[Any], Any], str]] = [
    ("task", "POST", "/v1/tasks", lambda p: {"lambda": "work", "payload": p}, "payload"),
    ("batch", "POST", "/v1/tasks/batch", lambda p: {"tasks": [{"lambda": "work", "payload": p}]}, "tasks[0].payload"),
    ("schedule", "PUT", "/v1/schedules/never", lambda p: {**EVERY_SECOND, "payload": p}, "payload"),
    ("chain", "POST", "/v1/chains", _link, "links[0].payload"),
]


@pytest.mark.parametrize("payload", [*NOT_OBJECTS, None], ids=repr)
@pytest.mark.parametrize(
    ("method", "path", "body", "field"), [s[1:] for s in API_SURFACES], ids=[s[0] for s in API_SURFACES]
)
def test_the_api_refuses_a_payload_that_is_not_an_object(
    raw: Any, item_count: Any, method: str, path: str, body: Callable[[Any], Any], field: str, payload: Any
) -> None:
    before = item_count()
    reply = raw(method, path, body(payload))
    assert (reply.status, reply.body["code"], reply.body["field"]) == (400, "wrong_type", field)
    assert "must be a JSON object" in reply.body["message"]
    assert item_count() == before


@pytest.fixture
def atf(stack: LocalStack, capsys: pytest.CaptureFixture[str]) -> Any:
    """Run `atf ...` in this process (--api-url after the verb's words); give back (status, stdout, stderr)."""

    def run(words: int, *argv: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as exited:
            main([*argv[:words], "--api-url", stack.api_url, *argv[words:]])
        captured = capsys.readouterr()
        return int(exited.value.code or 0), captured.out, captured.err

    return run


@pytest.mark.parametrize("payload", ["[]", '""', "0"])
def test_the_cli_refuses_a_payload_that_is_not_an_object(
    atf: Any, item_count: Any, tmp_path: Path, payload: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = item_count()
    code, _, err = atf(1, "schedule", "work", "--payload", payload)
    assert code == 2 and "--payload: must be a JSON object" in err
    code, _, err = atf(2, "schedules", "put", "never", "--lambda", "chore", "--every", "60", "--payload", payload)
    assert code == 2 and "--payload: must be a JSON object" in err
    lines = tmp_path / "tasks.jsonl"
    lines.write_text('{"lambda": "work"}\n{"lambda": "work", "payload": ' + payload + "}\n")
    with pytest.raises(SystemExit) as exited:
        main(["schedule", "--api-url", "http://127.0.0.1:9", "--file", str(lines)])
    refused = capsys.readouterr().err
    assert exited.value.code == 2 and refused.startswith("atf: wrong_type: ")
    assert "tasks.jsonl:2: payload: must be a JSON object" in refused and refused.endswith("(tasks[1].payload)\n")
    chain = tmp_path / "chain.json"
    chain.write_text(json.dumps(_link(json.loads(payload))))
    code, _, err = atf(2, "chains", "create", "--file", str(chain))
    assert code == 2 and "atf: wrong_type: links[0].payload: must be a JSON object" in err
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({**EVERY_SECOND, "payload": json.loads(payload)}))
    code, _, err = atf(2, "schedules", "put", "never", "--file", str(spec), "--json")
    kind = {"[]": "an array", '""': "a string", "0": "a number"}[payload]
    message = f"payload: must be a JSON object, not {kind}"
    assert code == 2 and json.loads(err) == {"code": "wrong_type", "message": message, "field": "payload"}
    assert item_count() == before


NAIVE = datetime(2030, 1, 1)
JAN_1, JAN_2 = (datetime(2030, 1, day, tzinfo=UTC) for day in (1, 2))
TASKS, BATCH, REDRIVE = "/v1/tasks", "/v1/tasks/batch", "/v1/lambdas/chore/dead-letters/redrive"
MANY = [{"lambda": "work"}, {"lambda": "work", "max_attempts": "many"}]
CYCLE = {"links": [{"name": "a", "lambda": "chore", "after": ["a"]}]}
Call = Callable[[AtfClient], Any]

# Input the SDK checks before sending, and the request the API gets for the same input:
# (case, SDK call, method, path, body). The SDK must raise what the API answers.
SAME_AS_THE_API: list[tuple[str, Call, str, str, Any]] = [
    (
        "run_at no offset",
        lambda a: a.schedule("work", run_at=NAIVE),
        "POST",
        TASKS,
        {"lambda": "work", "run_at": "2030-01-01T00:00:00"},
    ),
    (
        "negative delay",
        lambda a: a.schedule("work", delay_seconds=-1),
        "POST",
        TASKS,
        {"lambda": "work", "delay_seconds": -1},
    ),
    ("no attempts", lambda a: a.schedule("work", max_attempts=0), "POST", TASKS, {"lambda": "work", "max_attempts": 0}),
    (
        "no time limit",
        lambda a: a.schedule("work", timeout_seconds=0),
        "POST",
        TASKS,
        {"lambda": "work", "timeout_seconds": 0},
    ),
    ("bad lambda name", lambda a: a.schedule("No Such"), "POST", TASKS, {"lambda": "No Such"}),
    (
        "bad collection",
        lambda a: a.schedule("work", collection="a b"),
        "POST",
        TASKS,
        {"lambda": "work", "collection": "a b"},
    ),
    ("empty key", lambda a: a.schedule("work", key=""), "POST", TASKS, {"lambda": "work", "key": ""}),
    (
        "run_at and delay",
        lambda a: a.schedule("work", run_at=JAN_1, delay_seconds=1),
        "POST",
        TASKS,
        {"lambda": "work", "run_at": "2030-01-01T00:00:00Z", "delay_seconds": 1},
    ),
    (
        "unknown field",
        lambda a: a.submit({"lambda": "work", "colour": "red"}),
        "POST",
        TASKS,
        {"lambda": "work", "colour": "red"},
    ),
    ("missing lambda", lambda a: a.submit({"payload": {}}), "POST", TASKS, {"payload": {}}),
    (
        "delay as a string",
        lambda a: a.submit({"lambda": "work", "delay_seconds": "5"}),
        "POST",
        TASKS,
        {"lambda": "work", "delay_seconds": "5"},
    ),
    (
        "attempts as a boolean",
        lambda a: a.submit({"lambda": "work", "max_attempts": True}),
        "POST",
        TASKS,
        {"lambda": "work", "max_attempts": True},
    ),
    ("batch item", lambda a: a.schedule_many(MANY), "POST", BATCH, {"tasks": MANY}),
    (
        "until no offset",
        lambda a: a.pause("work", until=NAIVE),
        "PUT",
        "/v1/gates/work",
        {"action": "pause", "until": "2030-01-01T00:00:00"},
    ),
    (
        "reason too long",
        lambda a: a.drop("work", "c", reason="x" * 501),
        "PUT",
        "/v1/gates/work/c",
        {"action": "drop", "reason": "x" * 501},
    ),
    ("redrive rate", lambda a: a.redrive("chore", per_second=0), "POST", REDRIVE, {"per_second": 0}),
    (
        "redrive window",
        lambda a: a.redrive("chore", since=JAN_2, until=JAN_1),
        "POST",
        REDRIVE,
        {"since": "2030-01-02T00:00:00Z", "until": "2030-01-01T00:00:00Z"},
    ),
    (
        "discard limit",
        lambda a: a.discard("chore", limit=0),
        "POST",
        "/v1/lambdas/chore/dead-letters/discard",
        {"limit": 0},
    ),
    (
        "no cadence",
        lambda a: a.put_schedule("never", {"lambda": "chore"}),
        "PUT",
        "/v1/schedules/never",
        {"lambda": "chore"},
    ),
    (
        "bad cron",
        lambda a: a.put_schedule("never", {"lambda": "chore", "cron": "61 * * * *"}),
        "PUT",
        "/v1/schedules/never",
        {"lambda": "chore", "cron": "61 * * * *"},
    ),
    ("chain without links", lambda a: a.create_chain({"links": []}), "POST", "/v1/chains", {"links": []}),
    (
        "payload too deep",
        lambda a: a.schedule("work", TOO_DEEP),
        "POST",
        TASKS,
        {"lambda": "work", "payload": TOO_DEEP},
    ),
    ("chain cycle", lambda a: a.create_chain(CYCLE), "POST", "/v1/chains", CYCLE),
    ("malformed task id", lambda a: a.get("not-an-id"), "GET", "/v1/tasks/not-an-id", None),
    ("malformed schedule name", lambda a: a.get_schedule("a b"), "GET", "/v1/schedules/a%20b", None),
]


@pytest.mark.parametrize(
    ("call", "method", "path", "body"), [c[1:] for c in SAME_AS_THE_API], ids=[c[0] for c in SAME_AS_THE_API]
)
def test_the_sdk_refuses_bad_input_as_the_api_does(
    client: AtfClient, raw: Any, item_count: Any, call: Callable[[AtfClient], Any], method: str, path: str, body: Any
) -> None:
    before = item_count()
    reply = raw(method, path, body)
    assert reply.status == 400, reply.body
    with pytest.raises(AtfError) as caught:
        call(client)
    assert isinstance(caught.value, InputError)
    assert (caught.value.code, caught.value.field) == (reply.body["code"], reply.body["field"])
    assert caught.value.message == reply.body["message"]
    assert item_count() == before


def test_an_empty_collection_is_not_every_collection(client: AtfClient, item_count: Any) -> None:
    before = item_count()
    for gate in (client.pause, client.drop, client.resume):
        with pytest.raises(InputError) as caught:
            gate("work", "")
        assert caught.value.field == "collection"
    assert not [g for g in client.gates() if g.lambda_ == "work"]
    assert item_count() == before


@pytest.mark.parametrize(
    "url", ["127.0.0.1:8420", "localhost:8420", "http://", "ftp://x", "http://127.0.0.1:99999", "http://[::1"]
)
def test_an_api_url_that_is_not_one_is_refused_naming_it(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    # The clients are refused as they are made, naming api_url (botocore's signer had raised an AttributeError)
    from atf_sdk.async_client import AsyncAtfClient

    for make in (AtfClient, AsyncAtfClient):
        with pytest.raises(InputError) as refused:
            make(url)
        assert refused.value.field == "api_url" and url in str(refused.value)
    # And the CLI says so in one line, as a usage error
    with pytest.raises(SystemExit) as exited:
        main(["schedules", "list", "--api-url", url])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1 and err.endswith("(api_url)\n"), err


def test_a_read_timeout_must_be_positive() -> None:
    for timeout in (0, -1, float("nan")):
        with pytest.raises(InputError) as refused:
            AtfClient("http://127.0.0.1:9", timeout_s=timeout)
        assert refused.value.field == "timeout_s"


@pytest.mark.parametrize("payload", ['{"n": 1, "n": 2}', '{"n": NaN}'], ids=["a name given twice", "NaN"])
def test_the_cli_refuses_a_payload_the_api_would(atf: Any, item_count: Any, payload: str) -> None:
    before = item_count()
    code, _, err = atf(1, "schedule", "work", "--payload", payload)
    assert code == 2 and "--payload: not JSON: " in err, err
    assert item_count() == before
