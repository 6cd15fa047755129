"""The stack configuration the CLI's commands read (--config, else ATF_CONFIG / ATF_CONFIG_FILE): a stack
configuration or an environment file of infra/environments, and one line naming the file and field otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from atf_core.config import StackConfig
from atf_local.environment import REPO
from atf_sdk.commands.stack_file import stack_config
from tests.conftest import TEST_CONFIG


def refusal(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """The one line on stderr; the exit status is a usage error's."""
    with pytest.raises(SystemExit) as exited:
        stack_config(path, "worker")
    assert exited.value.code == 2
    return capsys.readouterr().err.removesuffix("\n")


def test_a_stack_configuration_file_reads_as_itself(tmp_path: Path) -> None:
    path = tmp_path / "stack.json"
    path.write_text(json.dumps(TEST_CONFIG))
    assert stack_config(path, "worker") == StackConfig.model_validate(TEST_CONFIG)


def test_an_environment_file_gives_the_stack_configuration_it_deploys() -> None:
    path = REPO / "infra" / "environments" / "dev.json"
    deployed = StackConfig.model_validate(json.loads(path.read_text())["config"])
    assert stack_config(path, "top") == deployed


def test_a_wrong_field_is_named_where_it_is_in_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    alone, wrapped = tmp_path / "stack.json", tmp_path / "env.json"
    alone.write_text(json.dumps({**TEST_CONFIG, "shards": 0}))
    wrapped.write_text(json.dumps({"environment": "dev", "config": {**TEST_CONFIG, "shards": 0}}))
    assert refusal(alone, capsys).startswith(f"atf worker: configuration {alone}: shards: ")
    assert refusal(wrapped, capsys).startswith(f"atf worker: configuration {wrapped}: config.shards: ")


def test_a_file_that_does_not_read_is_named_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing, broken, listed = tmp_path / "nowhere.json", tmp_path / "broken.json", tmp_path / "list.json"
    broken.write_text("{")
    listed.write_text("[]")
    assert refusal(missing, capsys) == f"atf worker: cannot read the configuration {missing}: No such file or directory"
    assert refusal(broken, capsys).startswith(f"atf worker: configuration {broken} is not valid JSON: ")
    assert refusal(listed, capsys).startswith(f"atf worker: configuration {listed}: configuration: ")


def test_without_a_file_the_environment_gives_it_or_none_does(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ATF_CONFIG_FILE", raising=False)
    monkeypatch.delenv("ATF_CONFIG", raising=False)
    assert stack_config(None, "top") is None
    monkeypatch.setenv("ATF_CONFIG", json.dumps(TEST_CONFIG))
    assert stack_config(None, "top") == StackConfig.model_validate(TEST_CONFIG)
