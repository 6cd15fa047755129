"""Process environment for talking to the embedded AWS: an endpoint and dummy credentials."""

from __future__ import annotations

import os
from pathlib import Path

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


def local_environment(endpoint: str, config_json: str) -> dict[str, str]:
    """What a process of the local stack needs in its environment."""
    env = dict(os.environ)
    for key, value in {**DUMMY_CREDENTIALS, **QUIET_POWERTOOLS}.items():
        env.setdefault(key, value)
    env[ENDPOINT_ENV] = endpoint
    env[CONFIG_ENV] = config_json
    return env


def component_environment(endpoint: str, config_json: str, component: str) -> dict[str, str]:
    """A component's process environment: the local one with its role's credentials (atf_local.iam),
    assumed once per process and component."""
    from atf_local.iam.accounts import credentials

    return {**local_environment(endpoint, config_json), **credentials(endpoint, component)}


def apply(endpoint: str, config_json: str) -> None:
    os.environ.update(local_environment(endpoint, config_json))
