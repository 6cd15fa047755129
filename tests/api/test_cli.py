"""The atf CLI's API verbs against the local stack: tables by default, JSON with --json."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from atf_local.stack import LocalStack
from atf_sdk.cli import main
from atf_sdk.commands.support import when
from tests.conftest import without_aws_credentials


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
    assert code == 0 and [t["status"] for t in json.loads(out)] == ["cancelled"]  # a list for one id too


def test_status_cancel_and_change_take_the_lambdas_route_with_lambda(atf: Any, client: Any) -> None:
    task = client.schedule("work", delay_seconds=600)
    code, out, _ = atf("status", task.id, "--lambda", "work", "--json")
    assert code == 0 and [t["id"] for t in json.loads(out)] == [task.id]
    code, _, err = atf("cancel", task.id, "--lambda", "mail")  # another lambda's route: not found there
    assert code == 3 and "not_found" in err and client.get(task.id).status.value == "new"
    code, _, _ = atf("change", task.id, "--lambda", "mail", "--delay", "60")
    assert code == 3 and client.get(task.id).next_at == task.run_at
    code, out, _ = atf("cancel", task.id, "--lambda", "work", "--json")
    assert code == 0 and [t["status"] for t in json.loads(out)] == ["cancelled"]


def test_a_change_of_nothing_names_the_options_and_sends_nothing(atf: Any, client: Any) -> None:
    task = client.schedule("work", delay_seconds=600)
    code, _, err = atf("change", task.id)
    assert (code, err) == (2, "atf: invalid_input: nothing to change: give --at or --delay, --priority or --payload\n")
    code, _, err = atf("change", task.id, "--json", "--api-url", "http://127.0.0.1:9")  # no API: nothing was sent
    assert code == 2 and json.loads(err) == {
        "code": "invalid_input",
        "message": "nothing to change: give --at or --delay, --priority or --payload",
        "field": None,
    }
    assert client.get(task.id).next_at == task.run_at


def test_several_ids_go_on_past_one_that_is_refused_and_say_which(atf: Any, client: Any) -> None:
    # Given two waiting tasks and an id no task has
    first, second, missing = (
        client.schedule("work", delay_seconds=600),
        client.schedule("work", delay_seconds=600),
        "0" * 32,
    )
    # When both are cancelled in one call with the missing id between them
    code, out, err = atf("cancel", first.id, missing, second.id, "--yes", "--json")
    # Then both are cancelled and listed, the missing one is named, and part of it failed
    assert code == 1 and [t["id"] for t in json.loads(out)] == [first.id, second.id]
    assert {client.get(t.id).status.value for t in (first, second)} == {"cancelled"}
    assert [json.loads(line) for line in err.splitlines()] == [
        {"id": missing, "code": "not_found", "message": f"no task '{missing}'", "field": "id"}
    ]
    # And: status shows what it found; again, the cancelled ones cannot be cancelled, and nothing found is 3
    code, out, err = atf("status", first.id, missing)
    assert code == 1 and first.id in out and err == f"atf: {missing}: not_found: no task '{missing}'\n"
    code, _, err = atf("cancel", missing, "1" * 32, "--yes")
    assert code == 3 and len(err.splitlines()) == 2
    code, _, _ = atf("status", missing, "1" * 32, "--wait", "1")
    assert code == 3


def test_schedule_takes_a_time_limit_and_refuses_a_bad_one(atf: Any, client: Any) -> None:
    code, out, _ = atf("schedule", "work", "--delay", "600", "--timeout", "90", "-q")
    assert code == 0 and client.get(out.strip()).timeout_seconds == 90
    code, _, err = atf("schedule", "work", "--timeout", "0")
    assert code == 2 and err.rstrip().endswith("(timeout_seconds)")


def test_schedule_takes_a_flow_key_and_refuses_a_bad_one(atf: Any, client: Any) -> None:
    code, out, _ = atf("schedule", "work", "--delay", "600", "--flow-key", "tenant-7", "-q")
    assert code == 0 and client.get(out.strip()).flow_key == "tenant-7"
    code, out, _ = atf("status", out.strip())
    assert code == 0 and "flow key tenant-7" in out
    code, _, err = atf("schedule", "work", "--flow-key", "a/b")
    assert code == 2 and err.rstrip().endswith("(flow_key)")


def test_errors_are_one_line_or_json_with_their_exit_status(atf: Any) -> None:
    code, _, err = atf("schedule", "nope")
    assert code == 2 and err.startswith("atf: unknown_lambda:") and err.rstrip().endswith("(lambda)")
    code, _, err = atf("stats", "nope", "--json")
    assert code == 2 and json.loads(err)["code"] == "unknown_lambda" and json.loads(err)["field"] == "lambda"


@pytest.mark.parametrize("verb", [["status"], ["cancel", "--yes"]], ids=["status", "cancel"])
def test_one_unknown_id_is_reported_as_one_of_several_is(atf: Any, verb: list[str]) -> None:
    # Given an id no task has
    missing = "0" * 32
    refusal = {"id": missing, "code": "not_found", "message": f"no task '{missing}'", "field": "id"}
    # When it alone is shown or cancelled with --json
    code, out, err = atf(verb[0], missing, *verb[1:], "--json")
    # Then the list is printed, empty, and the error names the id, as with several ids; the exit status is 3
    assert (code, json.loads(out), [json.loads(line) for line in err.splitlines()]) == (3, [], [refusal])
    # And without --json the refusal is the line a refused id of several gets, under no empty table
    code, out, err = atf(verb[0], missing, *verb[1:])
    assert (code, out, err) == (3, "", f"atf: {missing}: not_found: no task '{missing}'\n")


def test_schedule_a_file_with_progress(atf: Any, tmp_path: Path) -> None:
    lines = [json.dumps({"lambda": "mail", "payload": {"i": i}, "key": f"file-{i}"}) for i in range(150)]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("\n".join(lines) + "\n\n")
    code, out, err = atf("schedule", "--file", str(tasks))
    assert code == 0 and "created" in out and "150" in out
    assert err == ""  # no terminal on stderr: no bar, and not the empty line a bar leaves
    code, out, _ = atf("schedule", "--file", str(tasks), "--json")
    results = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(results) == 150 and {r["status"] for r in results} == {200}


def test_a_bad_line_stops_the_file_before_anything_is_sent(
    atf: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"lambda": "mail", "key": "never-sent"}\n{"lambda": "mail", "when": 3}\n')
    for output in ([], ["--json"]):
        with pytest.raises(SystemExit) as exited:  # nothing listens there: the file is refused before any call
            main(["schedule", "--file", str(tasks), "--api-url", "http://127.0.0.1:9", *output])
        err = capsys.readouterr().err
        assert exited.value.code == 2
        message = f"{tasks}:2: when is not a known field"
        if output:  # the API's error object, the task named as the batch route names it
            assert json.loads(err) == {"code": "unknown_field", "message": message, "field": "tasks[1].when"}
        else:
            assert err == f"atf: unknown_field: {message} (tasks[1].when)\n"


def test_a_line_the_api_refuses_stops_the_file_before_anything_is_written(
    atf: Any, tmp_path: Path, item_count: Any
) -> None:
    lines = [json.dumps({"lambda": "mail", "delay_seconds": 600}) for _ in range(149)]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("\n".join([*lines, json.dumps({"lambda": "mail", "priority": "zzz"})]) + "\n")
    before = item_count()
    code, _, err = atf("schedule", "--file", str(tasks))
    assert code == 2 and err.startswith("atf: unknown_priority:") and err.rstrip().endswith("(tasks[149].priority)")
    assert item_count() == before


def test_gates(atf: Any) -> None:
    code, out, _ = atf("gate", "pause", "work", "vip", "--reason", "cli")
    assert code == 0 and "pause" in out and "vip" in out
    code, out, _ = atf("gate", "list", "--json")
    listed = [gate for gate in json.loads(out) if (gate["lambda"], gate["collection"]) == ("work", "vip")]
    assert code == 0 and [(g["action"], g["reason"]) for g in listed] == [("pause", "cli")]
    code, out, _ = atf("gate", "resume", "work", "vip")
    assert code == 0 and "lifted the gate on work/vip" in out
    code, _, err = atf("gate", "resume", "work", "vip")
    assert code == 3 and "not_found" in err


def test_the_gate_table_shows_until_as_precise_as_it_was_given(atf: Any) -> None:
    # Given gates that lift at a whole second and between two
    hour = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0)
    whole, parted = when(hour), when(hour.replace(microsecond=250_000), "milliseconds")
    assert atf("gate", "pause", "work", "--collection", "whole", "--until", whole)[0] == 0
    assert atf("gate", "pause", "work", "--collection", "parted", "--until", parted)[0] == 0
    try:
        code, out, _ = atf("gate", "list")
    finally:
        atf("gate", "resume", "work", "--collection", "whole")
        atf("gate", "resume", "work", "--collection", "parted")
    # Then each reads as given: the second one not cut to a second before it lifts
    rows = {name: line for line in out.splitlines() for name in ("whole", "parted") if f" {name} " in line}
    assert code == 0 and whole in rows["whole"] and parted in rows["parted"], out


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


def test_a_missing_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nowhere.jsonl"
    for output in ([], ["--json"]):
        with pytest.raises(SystemExit) as exited:
            main(["schedule", "--file", str(missing), "--api-url", "http://127.0.0.1:9", *output])
        err = capsys.readouterr().err
        assert exited.value.code == 2
        message = f"cannot read {missing}: No such file or directory"
        if output:
            assert json.loads(err) == {"code": "invalid_input", "message": message, "field": "file"}
        else:
            assert err == f"atf: invalid_input: {message} (file)\n"


@pytest.mark.parametrize(
    ("content", "code", "field", "says"),
    [
        (b'\xff\xfe{"lambda": "mail"}\n', "invalid_input", "file", "not UTF-8"),
        (b'{"lambda": "mail"}\n[1]\n', "wrong_type", "tasks[1]", ":2: "),
        (b'{"lambda": "mail", "lambda": "work"}\n', "malformed_json", "tasks[0].lambda", "given twice"),
    ],
    ids=["not UTF-8", "a line not an object", "a name given twice"],
)
def test_a_file_that_is_not_lines_of_tasks_is_one_line_naming_what_the_api_would(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, code: str, field: str, says: str
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_bytes(content)
    with pytest.raises(SystemExit) as exited:  # nothing listens there: the file is refused before any call
        main(["schedule", "--file", str(tasks), "--api-url", "http://127.0.0.1:9", "--json"])
    refused = json.loads(capsys.readouterr().err)
    assert exited.value.code == 2 and (refused["code"], refused["field"]) == (code, field)
    assert says in refused["message"] and str(tasks) in refused["message"]


def test_a_collection_gate_takes_the_collection_as_an_option(atf: Any) -> None:
    """The documented form (README, docs/api.md) is --collection, as on every other verb; the older
    positional form still works, and the two cannot disagree."""
    code, out, err = atf("gate", "pause", "work", "--collection", "newsletter", "--reason", "documented")
    assert code == 0 and "newsletter" in out, err
    code, out, _ = atf("gate", "list", "--json")
    listed = [(g["collection"], g["reason"]) for g in json.loads(out) if g["lambda"] == "work"]
    assert listed == [("newsletter", "documented")], "one collection gated, not the lambda"
    code, _, err = atf("gate", "drop", "work", "spam", "--collection", "newsletter")
    assert code == 2 and "two collections given: spam and --collection newsletter (collection)" in err
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


def test_a_file_s_refused_tasks_are_named_from_0_as_the_batch_route_names_them(
    atf: Any, client: Any, tmp_path: Path
) -> None:
    # Given a file whose second task reuses the key of a task already scheduled, with another payload
    client.schedule("mail", {"v": 1}, key="file-taken", delay_seconds=600)
    lines = [{"lambda": "mail", "delay_seconds": 600}, {"lambda": "mail", "key": "file-taken", "payload": {"v": 2}}]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(line) + "\n" for line in [*lines, lines[0]]))
    # When it is scheduled with --quiet; Then one line a task, empty for the refused one, named tasks[1].key
    code, out, err = atf("schedule", "--file", str(tasks), "-q")
    printed = out.split("\n")[:-1]
    assert code == 1 and len(printed) == 3 and printed[1] == "" and all(printed[0::2])
    assert err.startswith("atf: tasks[1].key: conflict: ")
    # And the table's line names it alike, as does --json by its index (the API's batch item)
    code, out, _ = atf("schedule", "--file", str(tasks))
    assert code == 1 and "  tasks[1].key: conflict: " in out
    code, out, _ = atf("schedule", "--file", str(tasks), "--json")
    refused = [json.loads(line) for line in out.splitlines() if json.loads(line)["status"] == 409]
    assert [(item["index"], item["error"]["field"]) for item in refused] == [(1, "key")]


def test_status_waits_until_tasks_finish(atf: Any) -> None:
    later = atf("schedule", "work", "--delay", "600", "-q")[1].strip()
    gone = atf("schedule", "work", "--delay", "600", "-q")[1].strip()
    assert atf("cancel", gone)[0] == 0
    started = time.monotonic()
    code, out, _ = atf("status", gone, "--wait", "30", "--json")
    assert code == 0 and json.loads(out)[0]["status"] == "cancelled" and time.monotonic() - started < 5
    started = time.monotonic()
    code, out, err = atf("status", later, gone, "--wait", "1.5", "--json")
    assert code == 1 and f"not finished after 1.5 s: {later} (new)" in err
    assert [(t["id"], t["status"]) for t in json.loads(out)] == [(later, "new"), (gone, "cancelled")]
    assert 1.5 <= time.monotonic() - started < 10


def test_stats(atf: Any) -> None:
    atf("schedule", "mail", "--delay", "3600")
    # an hour overdue, so among the oldest due tasks stats reads (other tests leave hundreds due on "mail":
    # nothing consumes on this stack)
    overdue = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    atf("schedule", "mail", "--flow-key", "cli-stats-key", "--run-at", overdue)
    code, out, _ = atf("stats", "mail")
    assert code == 0 and "scheduled" in out and "normal" in out
    assert "busiest flow keys" in out and "cli-stats-key" in out
    code, out, _ = atf("stats", "mail", "--json")
    stats = json.loads(out)
    assert code == 0 and stats["lambda"] == "mail" and stats["priorities"]["normal"]["scheduled"] >= 1


def test_the_global_options_go_before_or_after_the_verb(stack: LocalStack, atf: Any, capsys: Any) -> None:
    task_id = atf("schedule", "work", "--delay", "600", "-q")[1].strip()
    shown = []
    for argv in (
        ["--json", "--api-url", stack.api_url, "status", task_id],
        ["status", task_id, "--json", "--api-url", stack.api_url],
        ["--api-url", stack.api_url, "status", "--json", task_id],
    ):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 0
        shown.append([t["id"] for t in json.loads(capsys.readouterr().out)])
    assert shown == [[task_id]] * 3


def test_each_kind_of_failure_has_its_exit_status(
    stack: LocalStack, atf: Any, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The documented statuses (docs/api.md): 2 usage, 3 not found, 4 conflict, 5 refused, 6 unavailable."""
    assert atf("schedule", "work", "--max-attempts", "0")[0] == 2
    assert atf("status", "f" * 32)[0] == 3
    started = atf("schedule", "work", "--delay", "600", "--key", "exit-4", "--payload", '{"a": 1}', "-q")[1].strip()
    assert atf("schedule", "work", "--delay", "600", "--key", "exit-4", "--payload", '{"a": 2}')[0] == 4
    with pytest.raises(SystemExit) as exited:  # nothing listens there: retried, then unavailable
        main(["status", started, "--api-url", "http://127.0.0.1:9"])
    assert exited.value.code == 6 and "atf: unavailable:" in capsys.readouterr().err
    without_aws_credentials(monkeypatch)
    assert atf("status", started)[0] == 5


def test_bulk_destructive_verbs_ask_first(atf: Any, client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = [atf("schedule", "work", "--delay", "600", "-q")[1].strip() for _ in range(2)]
    code, _, err = atf("cancel", *ids)
    assert code == 2 and "cancel 2 tasks? - no terminal to ask: add --yes" in err
    code, _, err = atf("gate", "drop", "work", "--collection", "ask")
    assert code == 2 and "drop the tasks of work/ask instead of running them?" in err
    code, _, err = atf("schedule", "--json")  # neither a lambda nor a file: the error object too
    assert code == 2 and json.loads(err) == {
        "code": "invalid_input",
        "message": "give a LAMBDA or --file",
        "field": "lambda",
    }
    code, _, err = atf("gate", "pause", "--json")
    assert code == 2 and json.loads(err)["field"] == "lambda"
    assert {client.get(i).status.value for i in ids} == {"new"} and not client.gates()
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda question: "n")
    assert atf("cancel", *ids)[0] == 1 and {client.get(i).status.value for i in ids} == {"new"}
    monkeypatch.setattr("builtins.input", lambda question: "y")
    assert atf("cancel", *ids)[0] == 0 and {client.get(i).status.value for i in ids} == {"cancelled"}
    assert atf("cancel", atf("schedule", "work", "--delay", "600", "-q")[1].strip())[0] == 0, "one id: no question"


@pytest.mark.parametrize(
    ("line", "completions"),
    [("atf dead-", ["dead-letters"]), ("atf dead-letters re", ["redrive"]), ("atf status --js", ["--json"])],
)
def test_bash_completes_verbs_and_options(line: str, completions: list[str], tmp_path: Path) -> None:
    script = tmp_path / "atf.bash"
    with script.open("w") as out:
        subprocess.run([sys.executable, "-m", "atf_sdk", "completion", "bash"], stdout=out, check=True, timeout=60)
    words = line.split()
    complete = (
        f"source {script}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; COMP_LINE='{line}'; "
        'COMP_POINT=${#COMP_LINE}; _shtab_atf; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    answer = subprocess.run(["bash", "-c", complete], capture_output=True, text=True, check=True, timeout=60)
    assert answer.stdout.split() == completions
