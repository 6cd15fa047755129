"""The shared core as a Lambda layer: atf_core and its dependencies under python/.

atf_core is the installed atf-core's (atf_cdk.sources): in this repository's checkout, the tree's
layers/atf_core; in a team's app, the atf-core released with their atf-cdk.

There is no Docker here, so the layer is bundled locally with pip, fetching
wheels for the Lambda platform rather than this machine's, at the versions of
requirements.lock: the ones `make setup` installs and the tests run. Synthesis
that must not touch the network (the tests, CI) sets `-c atf:layerBundling=source`,
which packs atf_core alone; such a layer is fine to synthesize and unfit to deploy.

The runtime is the Python the tests run on (3.11): a test holds the two together.
"""

from __future__ import annotations

import compileall
import py_compile
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import Annotations, AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from atf_cdk.sources import CORE_PACKAGE, core_requirements, core_source, lock_file

LOCK = lock_file()
BUNDLING_CONTEXT = "atf:layerBundling"
# The handlers import these next to atf_core's own dependencies; the lock gives the version.
HANDLER_REQUIREMENTS = ("aws-lambda-powertools[tracer]",)
RUNTIME = lambda_.Runtime.PYTHON_3_11
ARCHITECTURE = lambda_.Architecture.ARM_64
_PLATFORMS = {"arm64": "manylinux2014_aarch64", "x86_64": "manylinux2014_x86_64"}
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")


def compile_for_lambda(tree: Path, at: str) -> None:
    """Bytecode for every module of `tree`, as the runtime would write it and cannot: /opt and /var/task are
    read-only, so each cold start compiled every module it imported anew (about a second for the frontend's).
    Only with the runtime's Python (another's bytecode would be ignored). Checked by the source's hash, not
    its mtime, and recorded under `at`, where Lambda puts the tree: the same tree compiles to the same bytes,
    so the asset's hash stays put."""
    if f"python{sys.version_info.major}.{sys.version_info.minor}" != RUNTIME.name:
        return
    invalidation = py_compile.PycInvalidationMode.CHECKED_HASH
    compileall.compile_dir(str(tree), ddir=at, quiet=1, invalidation_mode=invalidation)


def requirements() -> list[str]:
    """atf_core's declared dependencies, plus what the handlers need."""
    return [*core_requirements(), *HANDLER_REQUIREMENTS]


def pip_command(target: str, reqs: list[str], lock: str) -> list[str]:
    version = RUNTIME.name.removeprefix("python")
    return [
        "-m", "pip", "install", "--quiet", "--no-compile", "--disable-pip-version-check",
        "--target", target,
        "--platform", _PLATFORMS[ARCHITECTURE.name],
        "--implementation", "cp",
        "--python-version", version,
        "--only-binary=:all:",
        # Every package, direct or not, at the version the tests ran.
        "--constraint", lock,
        *reqs,
    ]  # fmt: skip


@jsii.implements(ILocalBundling)
class LocalLayerBundling:
    """Copies the atf_core package into python/ and, unless `with_dependencies` is off, pip-installs its
    dependencies."""

    def __init__(self, source: Path, with_dependencies: bool, lock: Path = LOCK) -> None:
        self._source = source
        self._with_dependencies = with_dependencies
        self._lock = lock

    def try_bundle(self, output_dir: str, options: Any) -> bool:
        target = Path(output_dir) / "python"
        target.mkdir(parents=True, exist_ok=True)
        shutil.copytree(self._source, target / CORE_PACKAGE, ignore=_IGNORE, dirs_exist_ok=True)
        if self._with_dependencies:
            command = pip_command(str(target), requirements(), str(self._lock))
            subprocess.run([sys.executable, *command], check=True)
        compile_for_lambda(target, "/opt/python")
        return True


def layer_code(scope: Construct, source: Path | None = None) -> lambda_.Code:
    source = source or core_source()
    mode = scope.node.try_get_context(BUNDLING_CONTEXT) or "pip"
    if mode not in ("pip", "source"):
        raise ValueError(f"{BUNDLING_CONTEXT} must be 'pip' or 'source', not {mode!r}")
    # The image is only the fallback CDK asks for; local bundling always succeeds first.
    pip = pip_command("/asset-output/python", requirements(), "/tmp/requirements.lock")
    docker_command = [
        "bash",
        "-c",
        'printf %s "$ATF_LOCK" > /tmp/requirements.lock && mkdir -p /asset-output/python'
        " && cp -r . /asset-output/python/atf_core && python " + " ".join(f"'{arg}'" for arg in pip),
    ]
    return lambda_.Code.from_asset(
        str(source),
        exclude=["*.egg-info", "**/__pycache__"],
        # The lock is outside the source directory: hash what is bundled, so a new lock is a new layer.
        asset_hash_type=AssetHashType.OUTPUT,
        bundling=BundlingOptions(
            image=DockerImage.from_registry(f"public.ecr.aws/sam/build-{RUNTIME.name}"),
            command=docker_command,
            environment={"ATF_LOCK": LOCK.read_text()},
            local=LocalLayerBundling(source, with_dependencies=mode == "pip"),
        ),
    )


class CoreLayer(Construct):
    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)
        if (self.node.try_get_context(BUNDLING_CONTEXT) or "pip") == "source":
            Annotations.of(self).add_info(
                f"{BUNDLING_CONTEXT}=source: the layer holds atf_core without its dependencies; do not deploy it"
            )
        self.layer = lambda_.LayerVersion(
            self,
            "Layer",
            code=layer_code(self),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            description="atf_core, the async task framework's shared core, with its dependencies",
        )
