"""Process environment for talking to the embedded AWS: an endpoint and dummy credentials."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from urllib.request import urlopen

from aws_lambda_powertools.shared import constants

from atf_core.aws import ENDPOINT_ENV
from atf_core.config import CONFIG_ENV

# The checkout the local stack runs from: functions/ is deployed as code, not installed as a package,
# so the local processes import it from here.
REPO = Path(__file__).resolve().parents[2]
DUMMY_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}
QUIET_POWERTOOLS = {
    constants.TRACER_DISABLED_ENV: "true",
    constants.METRICS_DISABLED_ENV: "true",
    constants.POWERTOOLS_LOG_LEVEL_ENV: "WARNING",
}


# botocore's own per-service endpoint variable: it points a process's SQS clients at the stack's SQS
# server (atf_local.servers) while everything else goes to `endpoint`.
SQS_ENDPOINT_ENV = "AWS_ENDPOINT_URL_SQS"


def local_environment(endpoint: str, config_json: str, sqs_endpoint: str | None = None) -> dict[str, str]:
    """What a process of the local stack needs in its environment: the stack's endpoints (the SQS one
    asked of the stack when not given), the configuration, dummy credentials."""
    env = dict(os.environ)
    for key, value in {**DUMMY_CREDENTIALS, **QUIET_POWERTOOLS}.items():
        env.setdefault(key, value)
    env[ENDPOINT_ENV] = endpoint
    env[CONFIG_ENV] = config_json
    sqs = sqs_endpoint or sqs_endpoint_of(endpoint)
    if sqs:
        env[SQS_ENDPOINT_ENV] = sqs
    else:  # a stack with one server for all: not another stack's SQS
        env.pop(SQS_ENDPOINT_ENV, None)
    return env


def sqs_endpoint_of(endpoint: str) -> str | None:
    """Where the stack at `endpoint` serves SQS (atf_local.servers); None where it does not say (yet).
    Asked anew each time (once per process started): a stack later served on the same port is another
    stack, with its own SQS server."""
    from atf_local.servers import ENDPOINTS_PATH

    try:
        with urlopen(endpoint + ENDPOINTS_PATH, timeout=10) as answer:  # the stack's loopback
            return str(json.loads(answer.read())["sqs"])
    except (OSError, ValueError, KeyError):
        return None


def component_environment(endpoint: str, config_json: str, component: str) -> dict[str, str]:
    """A component's process environment: the local one with its role's credentials (atf_local.iam),
    assumed once per process and component."""
    from atf_local.iam.accounts import credentials

    return {**local_environment(endpoint, config_json), **credentials(endpoint, component)}


def point_at(endpoint: str) -> Callable[[], None]:
    """Point this process's clients at the stack at `endpoint`, each service at its own server (for a
    harness that talks to one stack at a time); returns what puts the variables back as they were, to
    call once the stack is gone: clients made later in the process (in-process moto's among them, which
    botocore's AWS_ENDPOINT_URL_SQS would send to a stopped server) must not inherit them."""
    before = {name: os.environ.get(name) for name in (ENDPOINT_ENV, SQS_ENDPOINT_ENV)}
    sqs = sqs_endpoint_of(endpoint)
    os.environ[ENDPOINT_ENV] = endpoint
    if sqs:
        os.environ[SQS_ENDPOINT_ENV] = sqs
    else:
        os.environ.pop(SQS_ENDPOINT_ENV, None)

    def restore() -> None:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    return restore


def apply(endpoint: str, config_json: str, sqs_endpoint: str | None = None) -> None:
    os.environ.update(local_environment(endpoint, config_json, sqs_endpoint))
