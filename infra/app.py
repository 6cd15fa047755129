#!/usr/bin/env python3
"""The CDK app: `cdk synth|deploy|destroy -c env=<dev|staging|prod>` from the repository root."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# atf_cdk (the construct library, also installed by `make setup`) lives beside this file, and
# atf_core in the tree's layers/: the layer ships the tree's code (atf_cdk.sources).
sys.path[:0] = [str(HERE), str(HERE.parent / "layers")]

import atf_cdk  # noqa: E402, F401  (quiets jsii's Node banner before aws_cdk loads)
from atf_cdk.app import build  # noqa: E402
from aws_cdk import App  # noqa: E402


def main() -> None:
    app = App()
    build(app)
    app.synth()


if __name__ == "__main__":
    main()
