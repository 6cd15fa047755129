"""The CLI's options: `atf worker`'s counts (a host of no executor or no thread would start nothing and still
report healthy), and refused choices named as they are typed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from atf_sdk import cli
from atf_sdk.cli import build_parser


@pytest.mark.parametrize("option", ["--executors", "--threads"])
@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_a_count_below_one_is_refused_naming_the_option(
    option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        build_parser().parse_args(["worker", "shop.lambdas:lambdas", option, value])
    assert refused.value.code == 2
    assert f"argument {option}: " in capsys.readouterr().err


def test_counts_of_one_or_more_are_taken() -> None:
    args = build_parser().parse_args(["worker", "shop.lambdas:lambdas", "--executors", "1", "--threads", "8"])
    assert (args.executors, args.threads) == (1, 8)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["schedule", "work", "--on-conflict", "bogus"], "(choose from 'refuse', 'replace')"),
        (
            ["schedules", "put", "s", "--lambda", "work", "--every", "60", "--overlap", "x"],
            "(choose from 'skip', 'allow')",
        ),
    ],
)
def test_a_refused_choice_lists_the_values_to_type(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(argv)
    assert says in capsys.readouterr().err


def test_a_long_rate_is_listed_in_whole_seconds() -> None:
    from datetime import UTC, datetime

    from atf_core.recurrence import Schedule, ScheduleSpec
    from atf_sdk.commands.schedules import _cadence

    def listed(every: float) -> str:
        spec = ScheduleSpec.model_validate({"lambda": "work", "every_seconds": every})
        return _cadence(Schedule(name="s", spec=spec, created_at=datetime(2027, 1, 1, tzinfo=UTC)))

    assert [listed(every) for every in (31_622_400, 300, 2.5)] == ["every 31,622,400 s", "every 300 s", "every 2.5 s"]


def test_a_ctrl_c_before_a_verb_handles_it_ends_the_cli_with_the_shells_status_and_no_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a starting worker host that a Ctrl-C reaches before it installs its handlers
    def interrupted(_args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_worker", interrupted)
    # When the CLI runs it
    with pytest.raises(SystemExit) as ended:
        cli.main(["worker", "shop.lambdas:lambdas"])
    # Then it exits as the shell reports a process Ctrl-C ended, saying nothing
    assert ended.value.code == 130
    assert capsys.readouterr().err == ""


# The child takes Python's own Ctrl-C handler whatever it inherits: a shell's background job (`make test &`)
# starts with SIGINT ignored, and Python then installs no handler at all, so no Ctrl-C would ever land.
HELD = """
import os, signal
from atf_sdk.worker.stop_signals import stop_signals_held
signal.signal(signal.SIGINT, signal.default_int_handler)
try:
    with stop_signals_held():
        os.kill(os.getpid(), signal.SIGINT)
        print("the held block went on", flush=True)
except KeyboardInterrupt:
    print("the Ctrl-C landed after it", flush=True)
"""


def test_a_ctrl_c_during_the_hosts_own_imports_lands_after_them() -> None:
    # Python turns a KeyboardInterrupt raised in a class body into a RuntimeError: held, it cannot land in one.
    # In a process of its own: the mask is a thread's, and the CLI has one thread then (pytest's workers have more).
    done = subprocess.run([sys.executable, "-c", HELD], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.splitlines() == ["the held block went on", "the Ctrl-C landed after it"]


def test_output_to_a_reader_that_has_gone_ends_quietly() -> None:
    # `atf ... | head`: the pipe's reader closes before the CLI writes (it takes longer than that to start)
    for _ in range(3):
        writer = subprocess.Popen(
            [sys.executable, "-m", "atf_sdk.cli", "completion", "bash"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert writer.stdout is not None and writer.stderr is not None
        writer.stdout.close()
        err = writer.stderr.read().decode()
        assert writer.wait(timeout=30) == 1 and err == "", err[-500:]


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["work"], "LAMBDA"),
        (["--priority", "high"], "--priority"),
        (["--collection", "c", "--delay", "5", "--max-attempts", "2"], "--collection, --delay, --max-attempts"),
        (["work", "--payload", "{}", "--key", "k"], "LAMBDA, --payload, --key"),
    ],
)
def test_schedule_file_refuses_a_task_option_beside_it_naming_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], named: str
) -> None:
    # Given a file of whole requests and options for one task beside it
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"lambda": "work"}\n')
    # When it is scheduled (nothing listens at the API: a call would fail otherwise)
    with pytest.raises(SystemExit) as exited:
        cli.main(["schedule", "--file", str(tasks), *extra, "--api-url", "http://127.0.0.1:9", "--json"])
    # Then it is a usage error naming the options, before anything is sent
    refused = json.loads(capsys.readouterr().err)
    assert exited.value.code == 2 and refused["code"] == "invalid_input" and refused["field"] == "file"
    assert refused["message"].startswith(f"{named}: not taken with --file")
