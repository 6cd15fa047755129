"""What an `atf` command imports. The CLI builds every verb's parser for every command it runs, so what a verb
needs must load when that verb runs: `atf --help` once cost a second of CPU, importing boto3, the core's
pydantic models, rich, and the cost verb's embedded AWS (the consumer, the worker's parts, moto)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

# Runs `atf ARGS...` as the console script does, then prints every module it loaded.
PROBE = """
import json, sys
from atf_sdk.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""
# Packages no verb needs to build its parser or print its help
HEAVY = {"boto3", "botocore", "s3transfer", "urllib3", "pydantic", "pydantic_core", "croniter"}
HEAVY |= {"rich", "shtab", "httpx", "aws_lambda_powertools", "moto"}
# What calling the API loads: the client (urllib3, botocore to sign) and the core's models
CLIENT = {"atf_core", "boto3", "botocore", "s3transfer", "urllib3", "pydantic", "pydantic_core", "croniter"}
# `atf cost` is atf-local's verb: the CLI loads the module that adds it, and that module's assumptions
COST_VERB = {"atf_local", "atf_local.cost", "atf_local.cost.command", "atf_local.cost.estimate"}
# Of the core, the options need its vocabulary alone: words and bounds, defined with no model
VOCABULARY = {"atf_core", "atf_core.vocabulary"}


def loaded(*argv: str) -> set[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATF_", "AWS_"))}
    env |= {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local", "AWS_DEFAULT_REGION": "us-east-1"}
    run = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    return set(json.loads(run.stdout.splitlines()[-1]))


def heavy(modules: set[str]) -> list[str]:
    """The heavy packages loaded, any part of atf-local but the module that adds its verb, and any part of the
    core but its vocabulary."""
    tops = {m.split(".")[0] for m in modules} & HEAVY
    local = {m for m in modules if m.startswith("atf_local") and m not in COST_VERB}
    return sorted(tops | local | {m for m in modules if m.startswith("atf_core") and m not in VOCABULARY})


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["--version"],
        ["status", "--help"],
        ["schedule", "--help"],
        ["schedules", "put", "--help"],
        ["bulk", "reschedule", "--help"],
        ["dead-letters", "redrive", "--help"],
        ["worker", "--help"],
        ["top", "--help"],
        ["cost", "--help"],
        ["worker-health", "--health-file", "/nonexistent/atf-health.json"],
        ["schedule", "--on-conflict", "neither", "work"],  # refused by argparse
    ],
    ids=" ".join,
)
def test_help_and_the_verbs_that_call_nothing_load_nothing_heavy(argv: list[str]) -> None:
    assert heavy(loaded(*argv)) == []


def test_completion_loads_shtab_alone() -> None:
    assert heavy(loaded("completion", "bash")) == ["shtab"]


class NotFound(BaseHTTPRequestHandler):
    """An API that knows no task: every request is answered at once (no retry, no wait)."""

    served: list[str] = []  # the paths asked for

    def do_GET(self) -> None:
        self.served.append(self.path)
        body = json.dumps({"code": "not_found", "message": "no task", "field": "id"}).encode()
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def api_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("output", [[], ["--json"]], ids=["table", "json"])
def test_an_api_verb_loads_the_client_and_not_the_other_verbs(api_url: str, output: list[str]) -> None:
    NotFound.served.clear()
    modules = loaded("--api-url", api_url, *output, "status", "0" * 32)
    assert NotFound.served == [f"/v1/tasks/{'0' * 32}"]  # it did call the API
    # The answer is an error, one line whatever the output: no table, so no rich either. boto3 comes with the
    # core's models (atf_core.api -> bulk -> store.codec) and the client's credentials (boto3.Session).
    assert [module for module in heavy(modules) if module.split(".")[0] not in CLIENT] == []
    assert not {"atf_core.consumer", "atf_sdk.top", "atf_sdk.snapshot", "atf_sdk.worker.host"} & modules
