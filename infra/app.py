#!/usr/bin/env python3
"""The CDK app: `cdk synth|deploy|destroy -c env=<dev|staging|prod>` from the repository root."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# atf_infra lives beside this file; atf_core is taken from the source tree, the same
# code the layer ships, whether or not it is installed in the running interpreter.
sys.path[:0] = [str(HERE), str(HERE.parent / "layers")]

import atf_infra  # noqa: E402, F401  (quiets jsii's Node banner before aws_cdk loads)
from atf_infra.app import build  # noqa: E402
from aws_cdk import App  # noqa: E402


def main() -> None:
    app = App()
    build(app)
    app.synth()


if __name__ == "__main__":
    main()
