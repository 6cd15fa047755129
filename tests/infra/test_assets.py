"""The core layer and the function packages, bundled locally without Docker."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from atf_cdk.constructs import layer
from atf_cdk.constructs.function import CONFIG_FILE, CopyPackage
from atf_cdk.constructs.workers import _is_registry_reference
from atf_cdk.sources import core_source

from tests.infra.conftest import ROOT


def test_layer_requirements_are_atf_cores_plus_the_handlers() -> None:
    requirements = layer.requirements()
    assert any(r.startswith("pydantic") for r in requirements)
    assert any(r.startswith("boto3") for r in requirements)
    assert any(r.startswith("aws-lambda-powertools[tracer]") for r in requirements)


def test_pip_fetches_wheels_for_the_lambda_platform_not_this_one_at_the_locked_versions() -> None:
    command = layer.pip_command("/out/python", ["pydantic>=2"], "/repo/requirements.lock")
    assert command[command.index("--platform") + 1] == "manylinux2014_aarch64"
    assert command[command.index("--python-version") + 1] == layer.RUNTIME.name.removeprefix("python")
    assert "--only-binary=:all:" in command and "--no-compile" in command
    assert command[command.index("--target") + 1] == "/out/python"
    assert command[command.index("--constraint") + 1] == "/repo/requirements.lock"


def test_source_bundling_copies_atf_core_alone(tmp_path: Path) -> None:
    assert layer.LocalLayerBundling(core_source(), with_dependencies=False).try_bundle(str(tmp_path), None)
    package = tmp_path / "python" / "atf_core"
    assert (package / "definitions.py").read_text() == (ROOT / "layers" / "atf_core" / "definitions.py").read_text()
    assert not list(package.rglob("__pycache__"))
    assert sorted(p.name for p in (tmp_path / "python").iterdir()) == ["atf_core"]


def test_pip_bundling_installs_the_requirements_next_to_atf_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []

    def fake_run(command: list[str], check: bool) -> Any:
        calls.append(command)
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(layer.subprocess, "run", fake_run)
    assert layer.LocalLayerBundling(core_source(), with_dependencies=True).try_bundle(str(tmp_path), None)
    (command,) = calls
    assert command[:2] == [sys.executable, "-m"]
    assert command[command.index("--target") + 1] == str(tmp_path / "python")
    assert command[command.index("--constraint") + 1] == str(ROOT / "requirements.lock")
    assert command[-len(layer.requirements()) :] == layer.requirements()


def test_function_package_keeps_its_import_path_and_gets_the_configuration(tmp_path: Path) -> None:
    assert CopyPackage(ROOT / "functions", "consumer", '{"name": "atf-x"}').try_bundle(str(tmp_path), None)
    assert (tmp_path / "functions" / "__init__.py").is_file()
    assert (tmp_path / "functions" / "consumer" / "handler.py").is_file()
    assert not (tmp_path / "functions" / "frontend").exists()
    assert (tmp_path / CONFIG_FILE).read_text() == '{"name": "atf-x"}'


@pytest.mark.parametrize(
    ("image", "registry"),
    [
        ("atf-examples:1.0", False),
        ("team/greet:1.0", False),
        ("public.ecr.aws/acme/greet:1.0", True),
        ("docker.io/library/python:3.12", True),
        ("localhost/greet:dev", True),
        ("registry:5000/greet", True),
    ],
)
def test_image_references_in_this_accounts_ecr_or_a_registry(image: str, registry: bool) -> None:
    assert _is_registry_reference(image) is registry


def test_routes_come_from_the_path_items_operations_only(tmp_path: Path) -> None:
    from atf_cdk.constructs.frontend import frontend_routes

    document = tmp_path / "openapi.json"
    document.write_text('{"paths": {"/v1/x/{id}": {"parameters": [], "summary": "s", "get": {}, "delete": {}}}}')
    assert frontend_routes(document) == {"/v1/x/{id}": ("DELETE", "GET"), "/v1/openapi.json": ("GET",)}


def test_the_layer_ships_the_installed_atf_core_which_in_a_checkout_is_the_trees() -> None:
    assert core_source() == ROOT / "layers" / "atf_core"
    declared = tomllib.loads((ROOT / "layers" / "pyproject.toml").read_text())["project"]["dependencies"]
    assert layer.requirements() == [*declared, *layer.HANDLER_REQUIREMENTS]
