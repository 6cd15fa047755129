"""The atf CLI's API verbs against the local stack: tables by default, JSON with --json."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from atf_local.stack import LocalStack
from atf_sdk.cli import main


@pytest.fixture
def atf(stack: LocalStack, capsys: pytest.CaptureFixture[str]) -> Any:
    """Run `atf ...` in this process; give back (exit status, stdout, stderr)."""

    def run(*argv: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as exited:
            main([*argv[:1], "--api-url", stack.api_url, *argv[1:]])
        captured = capsys.readouterr()
        return int(exited.value.code or 0), captured.out, captured.err

    return run


def test_schedule_status_and_cancel(atf: Any) -> None:
    code, out, _ = atf("schedule", "work", "--payload", '{"to": "ann"}', "--delay", "600", "--key", "cli-1", "--json")
    scheduled = json.loads(out)
    assert code == 0 and scheduled["created"] and scheduled["status"] == "new"
    code, out, _ = atf("schedule", "work", "--payload", '{"to": "ann"}', "--delay", "600", "--key", "cli-1")
    assert code == 0 and out.startswith(f"already scheduled {scheduled['id']}")
    code, out, _ = atf("status", scheduled["id"])
    assert code == 0 and "work" in out and "new" in out
    code, out, _ = atf("cancel", scheduled["id"], "--json")
    assert code == 0 and json.loads(out)["status"] == "cancelled"


def test_errors_are_one_line_or_json_and_exit_1(atf: Any) -> None:
    code, _, err = atf("schedule", "nope")
    assert code == 1 and err.startswith("atf: unknown_lambda:") and err.rstrip().endswith("(lambda)")
    code, _, err = atf("status", "0" * 32, "--json")
    assert code == 1 and json.loads(err) == {"code": "not_found", "message": f"no task '{'0' * 32}'", "field": "id"}


def test_schedule_a_file_with_progress(atf: Any, tmp_path: Path) -> None:
    lines = [json.dumps({"lambda": "mail", "payload": {"i": i}, "key": f"file-{i}"}) for i in range(150)]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("\n".join(lines) + "\n\n")
    code, out, _ = atf("schedule", "--file", str(tasks))
    assert code == 0 and "created" in out and "150" in out
    code, out, _ = atf("schedule", "--file", str(tasks), "--json")
    results = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(results) == 150 and {r["status"] for r in results} == {200}


def test_a_bad_line_stops_the_file_before_anything_is_sent(atf: Any, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"lambda": "mail", "key": "never-sent"}\n{"lambda": "mail", "when": 3}\n')
    with pytest.raises(SystemExit, match=r"tasks.jsonl:2: unknown_field: when is not a known field"):
        main(["schedule", "--file", str(tasks), "--api-url", "http://127.0.0.1:9"])


def test_gates(atf: Any) -> None:
    code, out, _ = atf("gate", "pause", "work", "vip", "--reason", "cli")
    assert code == 0 and "pause" in out and "vip" in out
    code, out, _ = atf("gate", "list", "--json")
    listed = [gate for gate in json.loads(out) if (gate["lambda"], gate["collection"]) == ("work", "vip")]
    assert code == 0 and [(g["action"], g["reason"]) for g in listed] == [("pause", "cli")]
    assert atf("gate", "resume", "work", "vip")[0] == 0
    code, _, err = atf("gate", "resume", "work", "vip")
    assert code == 1 and "not_found" in err


def test_tables_piped_elsewhere_are_not_cut_to_80_columns(atf: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Piped into grep or a file there is no terminal width: rows stay whole instead of wrapped or cut at 80."""
    monkeypatch.delenv("COLUMNS", raising=False)
    reason = "held while the mail provider migrates its sending domains to the new region " * 2
    assert atf("gate", "pause", "work", "--collection", "wide", "--reason", reason.strip())[0] == 0
    try:
        code, out, _ = atf("gate", "list")
    finally:
        atf("gate", "resume", "work", "--collection", "wide")
    row = next(line for line in out.splitlines() if "wide" in line)
    assert code == 0 and reason.strip() in row and len(row) > 160


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"^atf schedule: cannot read .*nowhere.jsonl: No such file or directory$"):
        main(["schedule", "--file", str(tmp_path / "nowhere.jsonl"), "--api-url", "http://127.0.0.1:9"])


def test_a_collection_gate_takes_the_collection_as_an_option(atf: Any) -> None:
    """The documented form (README, docs/api.md) is --collection, as on every other verb; the older
    positional form still works, and the two cannot disagree."""
    code, out, err = atf("gate", "pause", "work", "--collection", "newsletter", "--reason", "documented")
    assert code == 0 and "newsletter" in out, err
    code, out, _ = atf("gate", "list", "--json")
    listed = [(g["collection"], g["reason"]) for g in json.loads(out) if g["lambda"] == "work"]
    assert listed == [("newsletter", "documented")], "one collection gated, not the lambda"
    code, _, err = atf("gate", "drop", "work", "spam", "--collection", "newsletter")
    assert code == 1 and "two collections given: spam and --collection newsletter (collection)" in err
    assert atf("gate", "resume", "work", "--collection", "newsletter")[0] == 0
    code, out, _ = atf("gate", "list", "--json")
    assert code == 0 and not [g for g in json.loads(out) if g["lambda"] == "work"]


def test_schedule_quiet_prints_only_the_id(atf: Any, client: Any, tmp_path: Path) -> None:
    code, out, _ = atf("schedule", "work", "--payload", '{"n": 1}', "--delay", "600", "--quiet")
    assert code == 0 and client.get(out.strip()).payload == {"n": 1}
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(json.dumps({"lambda": "mail", "payload": {"i": i}, "delay_seconds": 600}) + "\n" for i in range(3))
    )
    code, out, _ = atf("schedule", "--file", str(tasks), "-q")
    ids = out.split()
    assert code == 0 and [client.get(i).payload for i in ids] == [{"i": 0}, {"i": 1}, {"i": 2}]


def test_status_waits_until_tasks_finish(atf: Any) -> None:
    later = atf("schedule", "work", "--delay", "600", "-q")[1].strip()
    gone = atf("schedule", "work", "--delay", "600", "-q")[1].strip()
    assert atf("cancel", gone)[0] == 0
    started = time.monotonic()
    code, out, _ = atf("status", gone, "--wait", "30", "--json")
    assert code == 0 and json.loads(out)["status"] == "cancelled" and time.monotonic() - started < 5
    started = time.monotonic()
    code, out, err = atf("status", later, gone, "--wait", "1.5", "--json")
    assert code == 1 and f"not finished after 1.5 s: {later} (new)" in err
    assert [(t["id"], t["status"]) for t in json.loads(out)] == [(later, "new"), (gone, "cancelled")]
    assert 1.5 <= time.monotonic() - started < 10


def test_stats(atf: Any) -> None:
    atf("schedule", "mail", "--delay", "3600")
    code, out, _ = atf("stats", "mail")
    assert code == 0 and "scheduled" in out and "normal" in out
    code, out, _ = atf("stats", "mail", "--json")
    stats = json.loads(out)
    assert code == 0 and stats["lambda"] == "mail" and stats["priorities"]["normal"]["scheduled"] >= 1
