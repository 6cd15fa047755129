"""The CLI's verbs for dead letters, schedules and chains against the quiet stack: tables by
default, JSON with --json, errors as one line and exit status 1."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pytest

from atf_core import lifecycle
from atf_core.schema import TaskStatus, utcnow
from atf_core.store.base import Change, TaskRef
from atf_local.stack import LocalStack
from atf_sdk.cli import build_parser, main
from atf_sdk.client import AtfClient
from tests.api.states import kill


@pytest.fixture
def atf(stack: LocalStack, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """Run `atf GROUP ACTION ...` in this process; give back (exit status, stdout, stderr)."""
    monkeypatch.setenv("COLUMNS", "220")  # wide enough that no table cell wraps

    def run(*argv: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as exited:
            main([*argv[:2], "--api-url", stack.api_url, *argv[2:]])
        captured = capsys.readouterr()
        return int(exited.value.code or 0), captured.out, captured.err

    return run


def test_dead_letters_list_dry_run_redrive_and_discard(atf: Any, client: AtfClient, store: Any) -> None:
    collection = f"cli-{uuid.uuid4().hex[:8]}"
    ids = [client.schedule("chore", {"i": i}, collection=collection).id for i in range(3)]
    for task_id, kind in zip(ids, ("KeyError", "KeyError", "OSError"), strict=True):
        kill(store, task_id, kind)
    code, out, _ = atf("dead-letters", "list", "chore", "--collection", collection)
    assert code == 0 and "3 dead letters of chore" in out and "OSError" in out
    code, out, _ = atf(
        "dead-letters", "list", "chore", "--collection", collection, "--error-type", "KeyError", "--json"
    )
    assert code == 0 and [d["id"] for d in json.loads(out)["dead_letters"]] == ids[:2]
    assert json.loads(out)["next"] is None
    # a page at a time: the first says where the next starts, and how to ask for it
    code, out, _ = atf("dead-letters", "list", "chore", "--collection", collection, "--limit", "2")
    assert code == 0 and "2 dead letters of chore, more follow" in out
    [after] = re.findall(r"--after (\S+)", out)
    code, out, _ = atf("dead-letters", "list", "chore", "--collection", collection, "--after", after, "--json")
    assert code == 0 and json.loads(out) == {"dead_letters": [ANY], "next": None}
    assert json.loads(out)["dead_letters"][0]["id"] == ids[2]
    code, out, _ = atf("dead-letters", "list", "chore", "--collection", collection, "--after", after)
    assert code == 0 and "the last page of the selection" in out
    code, out, _ = atf("dead-letters", "redrive", "chore", "--collection", collection, "--dry-run", "--per-second", "2")
    assert code == 0 and "dry run: would redrive 3 dead letters" in out
    code, _, err = atf("dead-letters", "redrive", "chore", "--collection", collection, "--error-type", "KeyError")
    asked = "redrive 2 dead letters of chore? - no terminal to ask: add --yes to go ahead"
    assert code == 2 and err.strip() == f"atf: invalid_input: {asked} (yes)", "it names the flag that goes ahead"
    code, _, err = atf(
        "dead-letters", "redrive", "chore", "--collection", collection, "--error-type", "KeyError", "--json"
    )
    assert code == 2 and json.loads(err) == {"code": "invalid_input", "message": asked, "field": "yes"}
    listed = json.loads(atf("dead-letters", "list", "chore", "--collection", collection, "--json")[1])
    assert len(listed["dead_letters"]) == 3
    code, out, _ = atf(
        "dead-letters", "redrive", "chore", "--collection", collection, "--error-type", "KeyError", "--yes"
    )
    assert code == 0 and "2 of 2 matched redriven" in out
    code, out, _ = atf("dead-letters", "discard", "chore", "--collection", collection, "--json", "-y")
    selection = json.loads(out)
    assert code == 0 and selection["changed"] == 1 and [d["id"] for d in selection["matched"]] == ids[2:]
    code, out, _ = atf("status", ids[2])
    assert code == 0 and "errors of" in out and "OSError: OSError on purpose" in out, "the error history"


def test_dead_letters_named_by_id(atf: Any, client: AtfClient, store: Any) -> None:
    ids = [client.schedule("chore", {"i": i}, collection="cli-ids").id for i in range(3)]
    for task_id in ids:
        kill(store, task_id, "KeyError")
    code, _, err = atf("dead-letters", "redrive", "chore", "--id", ids[0], "--id", ids[2])
    assert code == 2 and "redrive 2 dead letters of chore?" in err, "it asks, naming how many"
    code, out, _ = atf("dead-letters", "redrive", "chore", "--id", ids[2], "--id", ids[0], "--yes")
    assert code == 0 and "2 of 2 matched redriven" in out and ids[1] not in out
    assert [client.get(i).status for i in ids] == [TaskStatus.NEW, TaskStatus.DEAD_LETTER, TaskStatus.NEW]
    code, _, err = atf("dead-letters", "discard", "chore", "--id", ids[1], "--id", ids[0], "-y", "--json")
    assert code == 3 and json.loads(err)["field"] == "ids[1]", "not a dead letter now: not found, nothing changed"
    assert client.get(ids[1]).status is TaskStatus.DEAD_LETTER
    code, _, err = atf("dead-letters", "discard", "chore", "--id", ids[1], "--collection", "cli-ids", "-y", "--json")
    assert code == 2 and json.loads(err)["field"] == "ids", "a selection of its own: no filter beside it"


def test_a_drip_is_stopped_by_cancelling_the_ids_it_matched(atf: Any, client: AtfClient, store: Any) -> None:
    # Given a redrive dripping three dead letters back, one every 10 s (docs/api.md, "To stop a drip")
    ids = [client.schedule("chore", {"i": i}, collection="cli-drip").id for i in range(3)]
    for task_id in ids:
        kill(store, task_id, "KeyError")
    code, out, _ = atf(
        "dead-letters", "redrive", "chore", "--collection", "cli-drip", "--per-second", "0.1", "-y", "--json"
    )
    matched = [letter["id"] for letter in json.loads(out)["matched"]]
    assert code == 0 and sorted(matched) == sorted(ids)
    # When the ids it matched are cancelled, the first of them claimed by an executor meanwhile
    first = client.get(matched[0])
    assert store.transition(TaskRef.of(first), lifecycle.CLAIM, Change(now=utcnow(), attempt=first.attempt)).applied
    code, out, err = atf("cancel", "--yes", *matched)  # (this helper puts --api-url after its first two words)
    # Then the rest are cancelled and the one that had started is named as refused
    assert code == 1 and f"atf: {matched[0]}: conflict" in err, (out, err)  # 1: part of it failed
    statuses = [client.get(i).status for i in matched]
    assert statuses == [TaskStatus.CLAIMED, TaskStatus.CANCELLED, TaskStatus.CANCELLED]


def test_schedules_put_get_list_pause_resume_delete(atf: Any, tmp_path: Path) -> None:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    code, out, _ = atf("schedules", "put", name, "--lambda", "chore", "--cron", "0 6 * * *", "--timezone", "Asia/Tokyo")
    assert code == 0 and f"schedule {name} (cron '0 6 * * *' Asia/Tokyo) stored, next at" in out
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"lambda": "chore", "every_seconds": 300, "payload": {"from": "file"}}))
    code, out, _ = atf(
        "schedules", "put", name, "--file", str(spec), "--collection", "bulk", "--flow-key", "c-7",
        "--timeout", "90", "--json",
    )  # fmt: skip
    stored = json.loads(out)
    assert code == 0 and stored["spec"]["every_seconds"] == 300 and stored["spec"]["collection"] == "bulk"
    assert stored["spec"]["flow_key"] == "c-7" and stored["spec"]["timeout_seconds"] == 90
    assert stored["spec"]["payload"] == {"from": "file"} and stored["spec"]["cron"] is None
    code, out, _ = atf("schedules", "get", name, "--upcoming", "2", "--json")
    assert code == 0 and len(json.loads(out)["upcoming"]) == 2
    assert atf("schedules", "pause", name)[1].strip() == f"schedule {name} paused"
    code, out, _ = atf("schedules", "get", name)
    assert code == 0 and "paused" in out and "next: none while paused" in out
    code, out, _ = atf("schedules", "list", "--lambda", "chore")
    assert code == 0 and name in out and "every 300 s" in out
    (row,) = [line for line in out.splitlines() if name in line]
    assert "paused" in row and not re.search(r"\d{4}-\d\d-\d\dT", row), "paused: no next occurrence shown"
    assert atf("schedules", "resume", name)[1].startswith(f"schedule {name} resumed, next at")
    code, out, _ = atf("schedules", "get", name, "--upcoming", "0")
    assert code == 0 and "active" in out and "next:" not in out, "none asked for: not 'none while paused'"
    assert atf("schedules", "delete", name, "--json")[1].strip() == json.dumps({"deleted": name}, indent=2)
    code, _, err = atf("schedules", "get", name)
    assert code == 3 and err.startswith("atf: not_found:")


def test_a_bad_schedule_is_one_line(atf: Any) -> None:
    code, _, err = atf("schedules", "put", "bad", "--lambda", "chore", "--cron", "every day")
    assert code == 2 and err.startswith("atf: invalid_input:") and "cron" in err
    code, _, err = atf("schedules", "put", "bad", "--lambda", "chore", "--every", "60", "--timezone", "Nowhere/X")
    assert code == 2 and "timezone" in err
    code, _, err = atf("schedules", "put", "bad", "--lambda", "chore", "--every", "60", "--flow-key", "a b")
    assert code == 2 and "flow_key" in err


def test_chains_create_get_cancel_and_retry(atf: Any, store: Any, tmp_path: Path) -> None:
    chain = tmp_path / "chain.json"
    links = [{"name": "a", "lambda": "chore"}, {"name": "b", "lambda": "chore", "after": ["a"]}]
    chain.write_text(json.dumps({"links": links}))
    code, out, _ = atf("chains", "create", "--file", str(chain), "--json")
    created = json.loads(out)
    assert code == 0 and created["status"] == "running"
    assert [(link["name"], link["status"]) for link in created["links"]] == [("a", "new"), ("b", "waiting")]
    code, out, _ = atf("chains", "get", created["id"])
    assert code == 0 and f"chain {created['id']}: running" in out and "waiting" in out
    code, _, err = atf("chains", "retry", created["id"], "a")
    assert code == 4 and err.startswith("atf: conflict:") and err.rstrip().endswith("(link)")
    kill(store, created["links"][0]["task_id"])
    code, out, _ = atf("chains", "retry", created["id"], "a", "--budget", "2", "--json")
    assert code == 0 and json.loads(out)["links"][0]["status"] == "new"
    code, out, _ = atf("chains", "cancel", created["id"], "--json")
    assert code == 0 and {link["status"] for link in json.loads(out)["links"]} == {"cancelled"}


def test_chains_create_quiet_and_get_wait(atf: Any, client: AtfClient, tmp_path: Path) -> None:
    spec = tmp_path / "chain.json"
    links = [{"name": "a", "lambda": "chore"}, {"name": "b", "lambda": "chore", "after": ["a"]}]
    spec.write_text(json.dumps({"links": links}))
    code, out, _ = atf("chains", "create", "--file", str(spec), "--quiet")
    chain_id = out.strip()
    assert code == 0 and client.get_chain(chain_id).status.value == "running"
    code, _, err = atf("chains", "get", chain_id, "--wait", "1")
    assert code == 1 and f"chain {chain_id} still running after 1 s" in err
    client.cancel_chain(chain_id)
    code, out, _ = atf("chains", "get", chain_id, "--wait", "30", "--json")
    assert code == 0 and json.loads(out)["status"] == "cancelled"


def test_stats_show_dead_letters_schedules_and_limits(atf: Any) -> None:
    atf("schedules", "put", f"cli-{uuid.uuid4().hex[:8]}", "--lambda", "chore", "--every", "3600")
    code, out, _ = atf("stats", "chore")
    assert code == 0 and "dead letters:" in out and "every 3600 s into default" in out
    assert "limits (lambda): 50 starts/s, at most 8 running" in out and "limits (collection bulk): 2 running" in out


def test_every_verb_takes_json_and_the_top_hook_is_wired() -> None:
    parser = build_parser()
    for argv in (
        ["dead-letters", "list", "x"],
        ["dead-letters", "redrive", "x"],
        ["dead-letters", "discard", "x"],
        ["schedules", "put", "n"],
        ["schedules", "list"],
        ["schedules", "get", "n"],
        ["schedules", "delete", "n"],
        ["schedules", "pause", "n"],
        ["schedules", "resume", "n"],
        ["chains", "get", "i"],
        ["chains", "cancel", "i"],
        ["chains", "retry", "i", "l"],
    ):
        assert parser.parse_args([*argv, "--json"]).json, argv
    assert parser.parse_args(["top", "--once"]).once, "atf top registers through add_top_command"
