"""atf top: one frame rendered to text, its sources, and the live view in a terminal quitting on q or Ctrl-C."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import select
import signal
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from atf_core.schema import Gate, GateAction
from atf_core.telemetry import WORKER_SERVICE
from atf_local.environment import REPO
from atf_sdk.snapshot import ApiSource, CloudWatchRates, ConsoleSource, QueueRow, Snapshot
from atf_sdk.top import render_text
from tests.conftest import without_aws_credentials
from tests.console.conftest import ConsoleStack

AS_OF = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
BOX = str.maketrans("│┃", "  ")


def a_snapshot(successes: int = 7) -> Snapshot:
    gate = Gate(lambda_="mail", action=GateAction.PAUSE, reason="maintenance", created_at=AS_OF)
    rows = [
        QueueRow(lambda_="work", priority="high", counts={"new": 2, "processing": 1, "success": successes},
                 finished_per_min=12.5, lag_p95_ms=1830),
        QueueRow(lambda_="mail", priority="normal", counts={"new": 4, "dead_letter": 3}),
    ]  # fmt: skip
    return Snapshot(source="test", as_of=AS_OF, rows=rows, gates=[gate], dead_letters={"work": 0, "mail": 3})


def line_of(frame: str, *starts: str) -> str:
    """The table row (box characters taken out) whose first cells are these."""
    rows = [line.translate(BOX) for line in frame.splitlines()]
    (found,) = [row for row in rows if row.split()[: len(starts)] == list(starts)]
    return found


def test_one_frame_shows_counts_rates_lag_gates_and_dead_letters() -> None:
    frame = render_text(a_snapshot())

    header = line_of(frame, "lambda", "priority")
    assert header.split()[2:] == ["new", "processing", "success", "dead", "letter", "finished/min", "lag", "p95"]
    assert line_of(frame, "work", "high").split()[2:] == ["2", "1", "7", "0", "12.5", "1.83", "s"]
    assert line_of(frame, "mail", "normal").split()[2:] == ["4", "0", "0", "3", "-", "-"]
    assert line_of(frame, "mail/*").split() == ["mail/*", "pause", "-", "maintenance"]
    assert "dead letters: work 0  mail 3" in frame
    assert "q or Ctrl-C quits" in frame
    assert "q or Ctrl-C quits" not in render_text(a_snapshot(), live=False)  # --once's frame: nothing to quit


class _Snapshots(BaseHTTPRequestHandler):
    """A console that answers /api/snapshot with one more success each time."""

    served = 0

    def do_GET(self) -> None:
        type(self).served += 1
        body = a_snapshot(successes=type(self).served).model_dump_json(by_alias=True).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def fake_console() -> Iterator[str]:
    _Snapshots.served = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Snapshots)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class Terminal:
    """A process on a pseudo-terminal: what it drew, and keys typed into it."""

    def __init__(self, command: list[str]) -> None:
        self.fd, child = pty.openpty()
        env = {**os.environ, "COLUMNS": "120", "LINES": "40", "TERM": "xterm"}
        self.process = subprocess.Popen(
            command, stdin=child, stdout=child, stderr=child, cwd=REPO, env=env, preexec_fn=_own_terminal
        )
        os.close(child)
        self.screen = b""

    def wait_for(self, needle: bytes, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while needle not in self.screen:
            assert time.monotonic() < deadline, f"{needle!r} never drawn; got {self.screen[-400:]!r}"
            self.drain()

    def drain(self) -> None:
        # Keep reading: a child whose terminal output is not drained blocks on its next frame.
        if select.select([self.fd], [], [], 0.1)[0]:
            try:
                self.screen += os.read(self.fd, 65536)
            except OSError:  # the child closed the terminal
                time.sleep(0.1)

    def type(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def exit_code(self, timeout_s: float = 10) -> int:
        deadline = time.monotonic() + timeout_s
        try:
            while self.process.poll() is None:
                assert time.monotonic() < deadline, "still running"
                self.drain()
            return self.process.returncode
        finally:
            if self.process.poll() is None:
                self.process.kill()
            with contextlib.suppress(OSError):
                os.close(self.fd)


def _own_terminal() -> None:
    """In the child: a session of its own with the pty as its controlling terminal, so Ctrl-C reaches it."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    # Started with SIGINT ignored, as from the background of a non-interactive shell (CI's case):
    # Ctrl-C at the terminal must quit top all the same.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _top(url: str) -> Terminal:
    return Terminal([sys.executable, "-m", "atf_sdk.top", "--console-url", url, "--interval", "0.2"])


def test_top_redraws_in_place_and_quits_on_q(fake_console: str) -> None:
    terminal = _top(fake_console)
    terminal.wait_for(b"tasks by state")
    terminal.wait_for(b"\x1b[1A")  # the cursor went back up: the next frame is drawn over the last
    deadline = time.monotonic() + 10
    while _Snapshots.served < 4:  # and the frames are new ones, every 0.2 s
        assert time.monotonic() < deadline
        terminal.drain()
    terminal.type(b"q")
    assert terminal.exit_code() == 0


@pytest.mark.parametrize("argv", [["--json", "top"], ["top", "--json"]], ids=["before the verb", "after it"])
def test_json_before_or_after_the_verb_prints_one_snapshot(fake_console: str, argv: list[str]) -> None:
    # Given a console; when `atf top` is asked for JSON, the CLI's common option or the verb's own
    printed = subprocess.run(
        [sys.executable, "-m", "atf_sdk.cli", *argv, "--console-url", fake_console],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    # Then it prints the snapshot as JSON, not a table
    assert printed.returncode == 0, printed.stderr
    assert Snapshot.model_validate_json(printed.stdout).rows


def test_top_quits_on_ctrl_c(fake_console: str) -> None:
    terminal = _top(fake_console)
    terminal.wait_for(b"tasks by state")
    terminal.type(b"\x03")
    assert terminal.exit_code() == 0
    assert b"Traceback" not in terminal.screen


def test_top_ends_when_its_terminal_hangs_up(fake_console: str) -> None:
    terminal = _top(fake_console)
    terminal.wait_for(b"tasks by state")
    os.close(terminal.fd)  # the terminal window closed: top must not spin on a dead stdin
    try:
        terminal.process.wait(timeout=10)
    finally:
        if terminal.process.poll() is None:
            terminal.process.kill()


def test_the_api_source_reads_a_stack_through_its_api(console_stack: ConsoleStack) -> None:
    console_stack.client.schedule("mail", delay_seconds=3600)
    console_stack.client.pause("work", "later", reason="top test")
    try:
        snapshot = ApiSource(console_stack.client, ["work", "mail"]).snapshot()
        frame = render_text(snapshot)
    finally:
        console_stack.client.resume("work", "later")
    assert {(r.lambda_, r.priority) for r in snapshot.rows} >= {("work", "high"), ("mail", "normal")}
    assert int(line_of(frame, "mail", "normal").split()[2]) >= 1  # the scheduled column
    assert "work/later" in frame and "top test" in frame
    assert "need --cloudwatch" in frame
    assert snapshot.dead_letters is not None and set(snapshot.dead_letters) == {"work", "mail"}


def test_the_console_source_and_once(console_stack: ConsoleStack) -> None:
    snapshot = ConsoleSource(console_stack.console).snapshot()
    assert "success" in snapshot.columns()
    once = subprocess.run(
        [sys.executable, "-m", "atf_sdk.top", "--once", "--console-url", console_stack.console],
        capture_output=True, text=True, timeout=60, cwd=REPO,
        env={name: value for name, value in os.environ.items() if name != "COLUMNS"},
    )  # fmt: skip
    assert once.returncode == 0, once.stderr
    assert line_of(once.stdout, "mail", "normal")
    # Printed to a pipe, its rows are whole (no cell cut to "…" to fit 80 columns), and it says no "q quits"
    assert "…" not in once.stdout and "q or Ctrl-C" not in once.stdout, once.stdout
    # And --json prints the snapshot a frame shows, which the model reads back
    as_json = subprocess.run(
        [sys.executable, "-m", "atf_sdk.top", "--json", "--console-url", console_stack.console],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert as_json.returncode == 0, as_json.stderr
    printed = Snapshot.model_validate_json(as_json.stdout)
    assert ("mail", "normal") in {(row.lambda_, row.priority) for row in printed.rows}
    assert any(row["lambda"] == "mail" for row in json.loads(as_json.stdout)["rows"])  # keyed as the API's answers


class RecordingCloudWatch:
    """Answers GetMetricData with fixed values and keeps the queries it was asked."""

    def __init__(self, values: dict[tuple[str, str], list[float]]) -> None:
        self.values = values
        self.queries: list[dict[str, Any]] = []

    def get_metric_data(self, MetricDataQueries: list[dict[str, Any]], **_: Any) -> dict[str, Any]:  # noqa: N803
        self.queries += MetricDataQueries
        results = []
        for query in MetricDataQueries:
            stat = query["MetricStat"]
            dims = {d["Name"]: d["Value"] for d in stat["Metric"]["Dimensions"]}
            key = (stat["Metric"]["MetricName"], dims["priority"])
            results.append({"Id": query["Id"], "Values": self.values.get(key, [])})
        return {"MetricDataResults": results}


def test_cloudwatch_rates_read_the_worker_hosts_series() -> None:
    cloudwatch = RecordingCloudWatch(
        {("Succeeded", "high"): [40.0], ("FatalFailures", "high"): [10.0], ("StartLagMs", "high"): [900.0]}
    )
    rates = CloudWatchRates(cloudwatch, window_min=5, namespace="ATF/prod").rates([("work", "high"), ("work", "low")])
    assert rates.finished_per_min == {("work", "high"): 10.0, ("work", "low"): 0.0}
    assert rates.lag_p95_ms == {("work", "high"): 900.0}
    lag_queries = [
        q["MetricStat"] for q in cloudwatch.queries if q["MetricStat"]["Metric"]["MetricName"] == "StartLagMs"
    ]
    assert {q["Stat"] for q in lag_queries} == {"p95"}
    dims = {d["Name"]: d["Value"] for d in lag_queries[0]["Metric"]["Dimensions"]}
    assert dims == {"lambda": "work", "priority": "high", "service": WORKER_SERVICE}
    assert all(q["Metric"]["Namespace"] == "ATF/prod" for q in lag_queries)  # the environment's own


def test_cloudwatch_rates_need_the_stack_whose_namespace_they_read(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each deployed environment emits into a namespace of its name: without the stack there is none to read."""
    from atf_sdk.top import main

    monkeypatch.delenv("ATF_CONFIG", raising=False)
    monkeypatch.delenv("ATF_CONFIG_FILE", raising=False)
    with pytest.raises(SystemExit) as exited:
        main(["--api-url", "http://127.0.0.1:9", "--cloudwatch", "--once"])
    assert exited.value.code == 2, "a usage error, as argparse's"
    assert "--cloudwatch reads an environment's own metrics: name its stack" in capsys.readouterr().err


@pytest.mark.parametrize("through", ["atf top", "python -m atf_sdk.top"])
def test_an_api_error_is_one_line_with_the_clis_exit_status(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], through: str
) -> None:
    """As every verb of the CLI (docs/api.md): 5 refused, 6 unavailable; no traceback."""
    from atf_sdk.cli import main as atf
    from atf_sdk.top import main as python_m

    def top(*argv: str) -> int:
        with pytest.raises(SystemExit) as exited:
            atf(["top", *argv]) if through == "atf top" else python_m(list(argv))
        return int(exited.value.code or 0)

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "local")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local")
    assert top("--api-url", "http://127.0.0.1:9", "--lambda", "work", "--once") == 6
    assert capsys.readouterr().err.startswith("atf: unavailable: GET /v1/lambdas/work/stats: ")
    without_aws_credentials(monkeypatch)
    assert top("--api-url", "http://127.0.0.1:9", "--lambda", "work", "--once") == 5
    assert capsys.readouterr().err == (
        "atf: missing_authentication: no AWS credentials found: the API needs SigV4-signed requests\n"
    )


def test_an_environment_file_names_the_lambdas_to_show(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/observability.md's `atf top --config infra/environments/dev.json`: the file's stack configuration."""
    from atf_sdk.top import main

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "local")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local")
    with pytest.raises(SystemExit) as exited:
        main(["--api-url", "http://127.0.0.1:9", "--config", str(REPO / "infra/environments/dev.json"), "--once"])
    assert exited.value.code == 6  # past the configuration: it asked the API for the first of its lambdas
    assert capsys.readouterr().err.startswith("atf: unavailable: GET /v1/lambdas/greet/stats: ")


class _NotASnapshot(BaseHTTPRequestHandler):
    """A console of another version: its answer is JSON, but not a snapshot this atf reads."""

    def do_GET(self) -> None:
        body = b'{"tasks": "elsewhere"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_a_console_that_does_not_answer_or_answers_otherwise_is_named_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from atf_sdk.cli import main

    def top(url: str) -> int:
        with pytest.raises(SystemExit) as exited:
            main(["top", "--console-url", url, "--once"])
        return int(exited.value.code or 0)

    assert top("http://127.0.0.1:9") == 6  # unavailable: try again later
    assert capsys.readouterr().err.startswith("atf: unavailable: GET http://127.0.0.1:9/api/snapshot: ")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotASnapshot)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        assert top(url) == 1  # not a mistake in the command (2), nor an outage (6)
    finally:
        server.shutdown()
        server.server_close()
    line = capsys.readouterr().err
    assert line.startswith(f"atf: internal: GET {url}/api/snapshot: the console's answer is not a snapshot"), line
