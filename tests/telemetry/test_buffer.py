"""The metric buffer every component emits through, and the throttle counter."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import pytest
from botocore.config import Config

from atf_core.telemetry import NAMESPACE, WORKER_SERVICE, Metric, MetricBuffer, queue, watch_throttles
from tests.telemetry.emf import named, points


def test_one_document_per_dimension_set_counts_summed_timings_kept(capsys: pytest.CaptureFixture[str]) -> None:
    buffer = MetricBuffer(service=WORKER_SERVICE)
    buffer.count(Metric.STARTED, 1, queue("work", "high"))
    buffer.count(Metric.STARTED, 1, queue("work", "high"))
    buffer.count(Metric.STARTED, 1, queue("work", "low"))
    buffer.observe(Metric.START_LAG_MS, 120, "Milliseconds", queue("work", "high"))
    buffer.observe(Metric.START_LAG_MS, 80, "Milliseconds", queue("work", "high"))
    buffer.count(Metric.THROTTLES)

    assert buffer.flush() == 3
    out = capsys.readouterr().out
    high = {"lambda": "work", "priority": "high", "service": WORKER_SERVICE}
    assert [(p.dimensions, p.values) for p in named(out, Metric.STARTED)] == [
        (high, (2.0,)),
        ({**high, "priority": "low"}, (1.0,)),
    ]
    (lag,) = named(out, Metric.START_LAG_MS)
    assert (lag.unit, lag.dimensions, lag.values) == ("Milliseconds", high, (120.0, 80.0))
    (throttles,) = named(out, Metric.THROTTLES)
    assert throttles.dimensions == {"service": WORKER_SERVICE}
    assert all(json.loads(line)["_aws"]["CloudWatchMetrics"][0]["Namespace"] == NAMESPACE for line in out.splitlines())
    # What was flushed is gone
    assert buffer.flush() == 0
    assert capsys.readouterr().out == ""


def test_a_deployed_process_emits_into_its_environments_namespace(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CDK app sets POWERTOOLS_METRICS_NAMESPACE to the environment's (StackConfig.metrics_namespace)."""
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "ATF/staging")
    buffer = MetricBuffer(service=WORKER_SERVICE)
    buffer.count(Metric.STARTED, 1, queue("work", "high"))
    assert buffer.flush() == 1
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line)["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "ATF/staging"


def test_more_than_99_values_split_into_documents_emf_accepts(capsys: pytest.CaptureFixture[str]) -> None:
    buffer = MetricBuffer(service="consumer")
    for i in range(250):
        buffer.observe(Metric.CONSUMER_LOOP_SECONDS, i, "Seconds")
    buffer.count(Metric.TASKS_PER_LOOP, 3)

    assert buffer.flush() == 3
    found = points(capsys.readouterr().out)
    loops = [p for p in found if p.name == Metric.CONSUMER_LOOP_SECONDS]
    assert [len(p.values) for p in loops] == [99, 99, 52]
    assert sorted(v for p in loops for v in p.values) == [float(i) for i in range(250)]


def test_disabled_metrics_print_nothing_even_past_100_values(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    buffer = MetricBuffer(service="consumer")
    for i in range(150):
        buffer.observe(Metric.EXECUTION_MS, i, "Milliseconds")
    buffer.flush()
    assert capsys.readouterr().out == ""


def test_a_started_buffer_flushes_by_itself_and_on_close(capsys: pytest.CaptureFixture[str]) -> None:
    buffer = MetricBuffer(service=WORKER_SERVICE, flush_every_s=0.05).start()
    buffer.count(Metric.CLAIMED, 1, queue("work", "normal"))
    deadline = threading.Event()
    for _ in range(100):
        if named(capsys.readouterr().out, Metric.CLAIMED):
            break
        deadline.wait(0.02)
    else:
        raise AssertionError("the flushing thread never flushed")
    buffer.count(Metric.SUCCEEDED, 1, queue("work", "normal"))
    buffer.close()
    assert named(capsys.readouterr().out, Metric.SUCCEEDED, priority="normal")


class _Throttling(BaseHTTPRequestHandler):
    """DynamoDB that throttles the first two calls and then answers."""

    calls = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).calls += 1
        body: dict[str, Any]
        if type(self).calls <= 2:
            status, body = 400, {"__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException", "message": "slow"}
        else:
            status, body = 200, {"TableNames": []}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/x-amz-json-1.0")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def throttling_endpoint() -> Iterator[str]:
    _Throttling.calls = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Throttling)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_every_throttled_attempt_is_counted_though_botocore_retries_it(throttling_endpoint: str) -> None:
    retries = Config(retries={"mode": "standard", "total_max_attempts": 3}, connect_timeout=2, read_timeout=2)
    client = boto3.client("dynamodb", endpoint_url=throttling_endpoint, region_name="us-east-1", config=retries)
    seen: list[str] = []
    watch_throttles(client, seen.append)

    assert client.list_tables()["TableNames"] == []
    assert seen == ["dynamodb", "dynamodb"]


def test_the_workers_default_service_is_the_one_the_cdk_app_sets_and_alarms_on() -> None:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "infra"))
    from atf_cdk.constructs.workers import WORKER_SERVICE as CDK_WORKER_SERVICE

    assert CDK_WORKER_SERVICE == WORKER_SERVICE
