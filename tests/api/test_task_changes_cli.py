"""atf change and atf bulk on the quiet stack: --json, --dry-run, the question a real bulk run asks
(--yes to skip it), and the exit statuses (2 for bad input, 3 not found, 4 a task claimed meanwhile)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from atf_core.schema import TaskStatus
from atf_local.stack import LocalStack
from atf_sdk.cli import main
from atf_sdk.client import AtfClient
from tests.api.states import advance


@pytest.fixture
def atf(stack: LocalStack, capsys: pytest.CaptureFixture[str]) -> Any:
    """Run `atf ...` in this process; give back (exit status, stdout, stderr)."""

    def run(*argv: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as exited:
            main(["--api-url", stack.api_url, *argv])
        captured = capsys.readouterr()
        return int(exited.value.code or 0), captured.out, captured.err

    return run


@pytest.fixture
def collection(client: AtfClient) -> str:
    """Two `work` tasks waiting ten minutes, in a collection of their own."""
    name = f"cli-{uuid.uuid4().hex[:8]}"
    for n in range(2):
        client.schedule("work", {"n": n}, collection=name, delay_seconds=600)
    return name


def test_change_prints_the_task_and_a_claimed_one_exits_4(atf: Any, client: AtfClient, store: Any) -> None:
    task_id = client.schedule("work", delay_seconds=600).id
    code, out, _ = atf("change", task_id, "--priority", "low", "--payload", '{"v": 2}', "--json")
    changed = json.loads(out)
    assert code == 0 and (changed["priority"], changed["payload"]) == ("low", {"v": 2})
    code, out, _ = atf("change", task_id, "--delay", "60")
    assert code == 0 and out.startswith(f"{task_id}: new, priority low, runs at ")
    advance(store, task_id, TaskStatus.CLAIMED)
    code, _, err = atf("change", task_id, "--delay", "60")
    assert code == 4 and err.startswith("atf: conflict:") and "claimed" in err
    code, _, err = atf("change", task_id)
    assert code == 2 and err.rstrip().endswith("nothing to change: give --at or --delay, --priority or --payload")
    code, _, _ = atf("change", uuid.uuid4().hex, "--delay", "5")
    assert code == 3


def test_a_time_without_an_offset_is_refused_as_the_api_refuses_it(atf: Any, client: AtfClient) -> None:
    task_id = client.schedule("work", delay_seconds=600).id
    for verb in (["change", task_id, "--run-at"], ["change", task_id, "--at"], ["schedule", "work", "--run-at"]):
        # When a time comes without its offset (read as UTC, it would be hours off for most who type it)
        code, _, err = atf(*verb, "2030-01-01T00:00:00")
        # Then nothing is sent: the CLI says what is missing
        assert code == 2 and "needs a time zone offset" in err, verb
    assert client.get(task_id).scheduled_at > client.get(task_id).created_at  # unchanged: still ten minutes on
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0).astimezone(timezone(timedelta(hours=2)))
    code, out, err = atf("change", task_id, "--run-at", tomorrow.isoformat(), "--json")
    assert code == 0, err
    assert datetime.fromisoformat(json.loads(out)["scheduled_at"].replace("Z", "+00:00")) == tomorrow


def test_a_bulk_dry_run_lists_and_the_real_run_needs_yes_without_a_terminal(
    atf: Any, client: AtfClient, collection: str
) -> None:
    code, out, _ = atf("bulk", "reschedule", "--collection", collection, "--delay", "60", "--dry-run", "--json")
    dry = json.loads(out)
    assert code == 0 and dry["dry_run"] and len(dry["matched"]) == 2 and dry["changed"] == 0
    code, out, _ = atf("bulk", "cancel", "--collection", collection, "--dry-run")
    assert code == 0 and "dry run: would cancel 2 waiting tasks" in out
    code, _, err = atf("bulk", "cancel", "--collection", collection)
    assert code == 2 and "cancel 2 waiting tasks?" in err and "--yes" in err, "no terminal to ask: it stops"
    assert client.bulk_cancel(collection=collection, dry_run=True).matched, "and changed nothing"
    code, out, _ = atf(
        "bulk", "reprioritise", "--lambda", "work", "--collection", collection, "--priority", "high", "-y"
    )
    assert code == 0 and "reprioritise: 2 of 2 matched changed" in out
    code, out, _ = atf("bulk", "cancel", "--collection", collection, "--status", "new", "--yes", "--json")
    assert code == 0 and json.loads(out)["changed"] == 2


def test_bad_bulk_input_exits_2_naming_the_field(atf: Any) -> None:
    code, _, err = atf("bulk", "cancel", "--yes")
    assert code == 2 and err.rstrip().endswith("(all)")
    code, _, err = atf("bulk", "cancel", "--status", "bogus")
    assert code == 2 and "--status" in err
    code, _, err = atf("bulk", "reschedule", "--lambda", "work", "--at", "2030-01-01T00:00:00Z", "--delay", "5")
    assert code == 2 and "--delay" in err
    window = ["--since", "2030-01-02T00:00:00Z", "--until", "2030-01-01T00:00:00Z"]
    code, _, err = atf("bulk", "cancel", "--lambda", "work", *window)
    assert code == 2 and err.rstrip().endswith("(until)")
    code, _, err = atf("bulk", "reprioritise", "--lambda", "work", "--priority", "urgent", "--json")
    assert code == 2 and json.loads(err)["field"] == "priority"


def test_bulk_selects_by_flow_key(atf: Any, client: AtfClient, collection: str) -> None:
    key = f"cust-{uuid.uuid4().hex[:8]}"
    keyed = client.schedule("work", collection=collection, flow_key=key, delay_seconds=600).id
    code, out, _ = atf("bulk", "cancel", "--flow-key", key, "--dry-run", "--json")
    assert code == 0 and [(t["id"], t["flow_key"]) for t in json.loads(out)["matched"]] == [(keyed, key)]
    code, out, _ = atf("bulk", "cancel", "--flow-key", key, "--dry-run")
    assert code == 0 and "dry run: would cancel 1 waiting task" in out and "1 waiting tasks" not in out
    code, out, _ = atf("bulk", "cancel", "--flow-key", key, "--yes")
    assert code == 0 and "cancel: 1 of 1 matched changed" in out and key in out
    code, out, _ = atf("bulk", "cancel", "--collection", collection, "--dry-run")
    assert code == 0 and "dry run: would cancel 2 waiting tasks" in out
    code, out, _ = atf("bulk", "cancel", "--collection", collection, "--status", "new", "--limit", "1", "--dry-run")
    assert code == 0 and "dry run: would cancel 1+ waiting tasks" in out and "than the 1 this call reached" in out
    assert "run it again with --dry-run --cursor " in out
    assert len(client.bulk_cancel(collection=collection, dry_run=True).matched) == 2, "the keyless ones stay"
    code, _, err = atf("bulk", "cancel", "--flow-key", "a b")
    assert code == 2 and err.rstrip().endswith("(flow_key)")


def test_a_bulk_reschedule_says_why_it_leaves_a_task_that_would_expire(atf: Any, client: AtfClient) -> None:
    # Given a task that ends in five minutes if it has not started
    name, now = f"cli-exp-{uuid.uuid4().hex[:8]}", datetime.now(UTC)
    expiring = client.schedule("work", collection=name, delay_seconds=60, expire_at=now + timedelta(minutes=5))
    later = (now + timedelta(minutes=10)).isoformat()
    selection = ("bulk", "reschedule", "--lambda", "work", "--collection", name, "--at", later)
    # When its collection is moved past that, as a dry run and for real
    code, dry, _ = atf(*selection, "--dry-run")
    assert code == 0
    code, done, _ = atf(*selection, "--yes")
    # Then each says it is left, and why: not "claimed meanwhile", which it was not
    assert code == 0
    assert f"1 would leave as they were (they would run at or past their expire_at): {expiring.id}" in dry
    assert f"1 left as they were (claimed meanwhile, or past expire_at): {expiring.id}" in done
    assert client.get(expiring.id).next_at == expiring.run_at


def test_bulk_shows_the_cursor_and_goes_on_from_it(atf: Any, client: AtfClient, collection: str) -> None:
    # Given two waiting tasks, listed one at a time
    code, out, _ = atf("bulk", "cancel", "--collection", collection, "--limit", "1", "--dry-run", "--json")
    first = json.loads(out)
    assert code == 0 and first["more"] and first["cursor"]
    # When the cursor it printed is passed back, with a dry run as it says
    code, out, _ = atf("bulk", "cancel", "--collection", collection, "--limit", "1", "--dry-run")
    assert code == 0 and f"run it again with --dry-run --cursor {first['cursor']} for the rest" in out
    code, out, _ = atf(
        "bulk", "cancel", "--collection", collection, "--limit", "1", "--dry-run", "--cursor", first["cursor"], "--json"
    )
    # Then the listing goes on from there: the second task, and no more
    rest = json.loads(out)
    assert code == 0 and not rest["more"] and rest["matched"][0]["id"] != first["matched"][0]["id"]
    # And a real run given a dry run's cursor exits 2, naming it, changing nothing
    code, _, err = atf("bulk", "cancel", "--collection", collection, "--limit", "1", "--cursor", first["cursor"], "-y")
    assert code == 2 and err.rstrip().endswith("(cursor)")
    assert len(client.bulk_cancel(collection=collection, dry_run=True).matched) == 2
    # A real run paged with its own cursor cancels each once
    code, out, _ = atf("bulk", "cancel", "--collection", collection, "--limit", "1", "-y", "--json")
    done = json.loads(out)
    assert code == 0 and done["changed"] == 1 and done["more"]
    code, out, _ = atf("bulk", "cancel", "--collection", collection, "--limit", "1", "-y", "--cursor", done["cursor"])
    assert code == 0 and "cancel: 1 of 1 matched changed" in out and "--cursor" not in out
    assert client.bulk_cancel(collection=collection, dry_run=True).matched == []
    # And a cursor of another action exits 2, naming it
    code, _, err = atf("bulk", "reschedule", "--collection", collection, "--delay", "5", "--cursor", first["cursor"])
    assert code == 2 and err.rstrip().endswith("(cursor)")
