"""`cdk synth` with the pinned CLI works offline and synthesizes what the tests check."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from atf_cdk.account import ACCOUNT_STACK_NAME
from atf_cdk.constructs.layer import BUNDLING_CONTEXT

from tests.infra.conftest import ROOT, Synthesized, flatten

CDK = ROOT / "infra" / "node_modules" / ".bin" / "cdk"


def _offline_prefix() -> list[str]:
    """A network namespace with no interface up, where this machine allows one: the proof that
    synthesis needs no network. Elsewhere the command runs as is."""
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-n", "true"], capture_output=True).returncode == 0:
        return [unshare, "-n"]
    return []


def _comparable(template: dict[str, Any]) -> Any:
    """The CLI adds asset metadata and leaves out version reporting; neither is infrastructure.
    Asset hashes (and the API deployment's id, which follows them) are blanked, so that sources
    edited between the two syntheses do not count as a difference."""
    resources = {
        logical_id: {k: v for k, v in resource.items() if k != "Metadata"}
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] != "AWS::CDK::Metadata"
    }
    text = re.sub(r"[0-9a-f]{64}", "<asset>", json.dumps(resources, sort_keys=True))
    return json.loads(re.sub(r"(ApiDeployment)[0-9A-F]{8}[0-9a-f]{32,}", r"\1<hash>", text))


def test_cdk_synth_offline_matches_the_tested_template(tmp_path: Path, synthesized: dict[str, Synthesized]) -> None:
    assert CDK.exists(), "the CDK CLI is missing: run `make infra-cli`"
    env = {**os.environ, "CDK_DISABLE_CLI_TELEMETRY": "true"}
    command = [
        # The app run by the interpreter running these tests (cdk.json names .venv's), so both syntheses
        # use the same aws-cdk-lib, in `make test-lowest` too.
        *_offline_prefix(), str(CDK), "synth", "--app", f"{sys.executable} infra/app.py",
        "--quiet", "--no-notices", "--no-version-reporting",
        "-c", "env=dev", "-c", f"{BUNDLING_CONTEXT}=source", "-o", str(tmp_path),
    ]  # fmt: skip
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    synth = synthesized["dev"]
    # The environment's stack with its lambdas' nested stacks, and the account's stack.
    template = flatten(tmp_path, synth.stack)
    assert _comparable(template) == _comparable(synth.json)
    assert template["Outputs"].keys() == synth.json["Outputs"].keys()
    account = f"{ACCOUNT_STACK_NAME}.template.json"
    cli, tested = (json.loads((outdir / account).read_text()) for outdir in (tmp_path, synth.outdir))
    assert _comparable(cli) == _comparable(tested)


def test_cli_is_pinned_to_a_2x_release_that_reads_this_assembly() -> None:
    lock = json.loads((ROOT / "infra" / "package-lock.json").read_text())
    version = lock["packages"]["node_modules/aws-cdk"]["version"]
    major, minor, _ = (int(part) for part in version.split("."))
    assert major == 2 and minor >= 1148
    package = json.loads((ROOT / "infra" / "package.json").read_text())
    assert package["devDependencies"]["aws-cdk"] == version
