"""What the start-up hook attaches to a process the fault harness or the benchmarks start.

The framework's code neither knows nor reads any of this. The harness puts
HOOK_DIR on the child's PYTHONPATH; Python imports its `sitecustomize` as it
starts, and that calls `install_from_env`, which reads

    ATF_FAULTS          a fault plan: installed on every DynamoDB and SQS client (atf_local.instruments.faults)
    ATF_HISTORY_DIR     where the history goes: every state write and send recorded (atf_local.instruments.wire)
    ATF_CLOCK_OFFSET_S  seconds to shift this process's clock by, through the one seam the framework has for it
                        (atf_core.clock.set_process_clock)

Clients are reached as botocore creates them: `on_every_client` wraps
botocore's Session.create_client for this process, so every session made
afterwards (boto3 makes one per boto3.Session) hands its new clients over.

A worker host's executors do not start an interpreter: they fork from the
host's fork server, a child of the host that inherited its environment, and
the hook runs once, there. What it installs is inherited by every executor,
and nothing in it may belong to one process: the server makes no client, so
the fault plan's counters and each client's random stream start in the
executor (faults.py), and a history file is named by the pid that writes it
(history.py).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

HOOK_DIR = Path(__file__).resolve().parent / "hook"
CLOCK_OFFSET_ENV = "ATF_CLOCK_OFFSET_S"
SERVICES = ("dynamodb", "sqs")
# A long poll waits up to 20 s, so its client reads for longer (atf_core.aws.make_clients gives it 25 s).
_LONG_POLL_READ_TIMEOUT_S = 20

ClientHook = Callable[[Any, str], None]  # (client, label)
_hooks: list[ClientHook] = []
_wrapping = threading.Lock()


def install_from_env() -> None:
    """Attach what the environment asks for; nothing at all when it asks for nothing."""
    from atf_local.instruments.faults import FAULTS_ENV
    from atf_local.instruments.history import HISTORY_ENV

    if os.environ.get(CLOCK_OFFSET_ENV):
        shift_clock(float(os.environ[CLOCK_OFFSET_ENV]))
    if os.environ.get(FAULTS_ENV):
        from atf_local.instruments.faults import install, plan_from_env

        plan = plan_from_env()
        if plan is not None:
            on_every_client(lambda client, label: install(client, label, plan))
    if os.environ.get(HISTORY_ENV):
        from atf_local.instruments.history import History
        from atf_local.instruments.wire import WireRecorder

        recorder = WireRecorder(History.from_env("wire"))
        on_every_client(lambda client, label: recorder.attach(client))


def shift_clock(seconds: float) -> None:
    from atf_core.clock import set_process_clock
    from atf_core.schema import utcnow

    offset = timedelta(seconds=seconds)

    def shifted() -> datetime:
        return utcnow() + offset

    set_process_clock(shifted)


def on_every_client(hook: ClientHook) -> None:
    """Call hook(client, label) for every DynamoDB and SQS client this process creates from now on."""
    import botocore.session

    with _wrapping:
        if not _hooks:
            create_client = botocore.session.Session.create_client

            def create_and_hook(self: Any, service_name: str, *args: Any, **kwargs: Any) -> Any:
                client = create_client(self, service_name, *args, **kwargs)
                if service_name in SERVICES:
                    label = client_label(service_name, kwargs.get("config"))
                    for each in list(_hooks):
                        each(client, label)
                return client

            botocore.session.Session.create_client = create_and_hook  # type: ignore[method-assign]
        _hooks.append(hook)


def client_label(service: str, config: Any) -> str:
    """Which of atf_core.aws.AwsClients' fields a new client is, from the configuration it was built with."""
    from atf_core.aws import HEARTBEAT_CONFIG

    if service == "dynamodb":
        return "dynamodb_heartbeat" if config is HEARTBEAT_CONFIG else "dynamodb"
    read_timeout = getattr(config, "read_timeout", None) if config is not None else None
    return "sqs_long_poll" if read_timeout is not None and read_timeout > _LONG_POLL_READ_TIMEOUT_S else "sqs"
