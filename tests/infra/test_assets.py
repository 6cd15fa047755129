"""The core layer and the function packages, bundled locally without Docker."""

from __future__ import annotations

import marshal
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest
from atf_cdk.constructs import layer
from atf_cdk.constructs.function import CONFIG_FILE, CopyPackage
from atf_cdk.constructs.workers import _is_registry_reference
from atf_cdk.sources import core_source, functions_source

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
    assert sorted(p.name for p in (tmp_path / "python").iterdir()) == ["atf_core"]


def test_the_layer_carries_its_bytecode_as_lambda_would_read_it_and_the_same_each_time(tmp_path: Path) -> None:
    """/opt is read-only on Lambda: bytecode not shipped is compiled anew at every cold start."""
    first, second = tmp_path / "first", tmp_path / "second"
    for out in (first, second):
        assert layer.LocalLayerBundling(core_source(), with_dependencies=False).try_bundle(str(out), None)
    package = first / "python" / "atf_core"
    compiled = package / "__pycache__" / f"definitions.{sys.implementation.cache_tag}.pyc"
    code = marshal.loads(compiled.read_bytes()[16:])
    assert code.co_filename == "/opt/python/atf_core/definitions.py"  # where Lambda puts the layer
    assert int.from_bytes(compiled.read_bytes()[4:8], "little") & 0b11 == 0b11  # checked by the source's hash
    sources = {p.relative_to(first): p.read_bytes() for p in first.rglob("*") if p.is_file()}
    assert sources == {p.relative_to(second): p.read_bytes() for p in second.rglob("*") if p.is_file()}
    assert {p.stem for p in package.glob("*.py")} <= {p.name.split(".")[0] for p in (package / "__pycache__").iterdir()}


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
    compiled = tmp_path / "functions" / "consumer" / "__pycache__" / f"handler.{sys.implementation.cache_tag}.pyc"
    assert marshal.loads(compiled.read_bytes()[16:]).co_filename == "/var/task/functions/consumer/handler.py"


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


# What ships carries no test or measurement instrument (they live in atf_local and attach from outside).
INSTRUMENT_MODULES = frozenset({"faults", "history", "billing", "cost", "wire", "instruments", "sitecustomize"})
TEST_SWITCHES = ("ATF_FAULTS", "ATF_HISTORY_DIR", "ATF_CLOCK_OFFSET_S")


def shipped(tmp_path: Path) -> dict[str, str]:
    """Every Python file of the Lambda layer, the function packages and the SDK wheel, with its text."""
    layer.LocalLayerBundling(core_source(), with_dependencies=False).try_bundle(str(tmp_path / "layer"), None)
    for function in ("consumer", "frontend"):
        CopyPackage(functions_source(), function, "{}").try_bundle(str(tmp_path / function), None)
    files = {str(p.relative_to(tmp_path)): p.read_text() for p in tmp_path.rglob("*.py")}
    # The wheel from a clean copy: setuptools' build/ directory may hold modules deleted since.
    source = shutil.copytree(ROOT / "sdk", tmp_path / "sdk-source", ignore=shutil.ignore_patterns("build", "*.egg-*"))
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path / "wheel"), str(source)]
    subprocess.run(command, check=True, timeout=300)
    [wheel] = (tmp_path / "wheel").glob("atf_sdk-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        files.update({f"wheel/{n}": archive.read(n).decode() for n in archive.namelist() if n.endswith(".py")})
    return files


def test_what_ships_carries_no_instrument_and_reads_no_test_switch(tmp_path: Path) -> None:
    files = shipped(tmp_path)
    assert "layer/python/atf_core/clock.py" in files and "wheel/atf_sdk/worker/executor.py" in files
    assert "consumer/functions/consumer/handler.py" in files and "frontend/functions/frontend/handler.py" in files
    instruments = [path for path in files if INSTRUMENT_MODULES & set(Path(path).with_suffix("").parts)]
    assert instruments == []
    switches = [(path, name) for path, text in files.items() for name in TEST_SWITCHES if name in text]
    assert switches == []
    # The SDK's pytest plugin (atf_sdk.testing) starts the local stack, from its `testing` extra
    imports_local = re.compile(r"^\s*(from|import) atf_local\b", re.MULTILINE)
    local = [path for path, text in files.items() if imports_local.search(text) and "testing" not in Path(path).parts]
    assert local == [], "shipped code imports the local stack"
