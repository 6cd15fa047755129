"""python -m atf_local.iam.synth CONFIG.json OUT.json: the CDK app's flattened template for a local
stack's configuration (atf_local.iam.template runs it in a child process and caches what it writes)."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import atf_cdk  # noqa: F401  (quiets jsii's Node banner before aws_cdk loads)
from atf_cdk.environment import AtfProps
from atf_cdk.service import WorkerService
from atf_cdk.stack import AtfStack
from aws_cdk import App

from atf_core.config import StackConfig
from atf_local.iam.template import LOCAL_ENVIRONMENT, cdk_context, flatten


def local_props(config: StackConfig) -> AtfProps:
    """The local stack as an environment: a worker service per lambda, as the repository's environments
    have. The configuration is taken as it is: the naming rules of a deployed environment
    (atf_cdk.settings) are not the local stack's."""
    workers = [WorkerService(name=name, lambdas=[name]) for name in config.lambdas]
    return AtfProps(config=config, workers=workers, stage=LOCAL_ENVIRONMENT)


def main(config_file: str, output: str) -> None:
    config = StackConfig.model_validate_json(Path(config_file).read_text())
    with tempfile.TemporaryDirectory(prefix="atf-cdk-out-") as outdir:
        app = App(context=cdk_context(LOCAL_ENVIRONMENT), outdir=outdir)
        stack = AtfStack(app, config.name, local_props(config))
        app.synth()
        Path(output).write_text(json.dumps(flatten(Path(outdir), stack)))


if __name__ == "__main__":
    main(*sys.argv[1:3])
