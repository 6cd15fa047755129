"""Environment files, and the mistakes in them that are refused before anything is deployed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from atf_cdk.builders import retention
from atf_cdk.constructs.consumer import consumer_timeout, group_inputs, reserved_concurrency
from atf_cdk.settings import EnvironmentSettings, WorkerSettings, available_environments, load_environment
from aws_cdk import Duration
from pydantic import ValidationError

from atf_core.config import StackConfig
from tests.infra.conftest import ROOT


def _settings(**changes: Any) -> dict[str, Any]:
    base = json.loads((ROOT / "infra" / "environments" / "dev.json").read_text())
    base.update(changes)
    return base


def test_the_three_environments_load() -> None:
    assert available_environments() == ["dev", "prod", "staging"]
    for name in available_environments():
        settings = load_environment(name)
        assert settings.environment == name
        assert settings.stack_name == settings.config.name
        assert {name for service in settings.services() for name in service.lambdas} == set(settings.config.lambdas)


def test_unknown_environment_names_the_known_ones() -> None:
    with pytest.raises(SystemExit, match="dev"):
        load_environment("qa")


def test_an_environment_file_must_declare_its_own_name(tmp_path: Path) -> None:
    (tmp_path / "qa.json").write_text(json.dumps(_settings()))
    with pytest.raises(SystemExit, match="declares environment 'dev'"):
        load_environment("qa", tmp_path)


def test_every_lambda_needs_a_worker_and_every_worker_a_lambda() -> None:
    settings = _settings()
    del settings["workers"]["greet"]
    with pytest.raises(ValidationError, match=r"missing \['greet'\]"):
        EnvironmentSettings.model_validate(settings)
    settings = _settings()
    settings["workers"]["ghost"] = {"image": "ghost:1"}
    with pytest.raises(ValidationError, match=r"unknown \['ghost'\]"):
        EnvironmentSettings.model_validate(settings)


def test_more_consumer_groups_than_shards_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"consumer\.groups"):
        EnvironmentSettings.model_validate(_settings(consumer={"groups": 3}))


def test_names_must_carry_the_environment_so_environments_never_share_resources() -> None:
    settings = _settings()
    settings["config"]["name"] = "atf"
    with pytest.raises(ValidationError, match="must be 'dev' or end with '-dev'"):
        EnvironmentSettings.model_validate(settings)
    settings = _settings()
    settings["config"]["table_name"] = "tasks"
    with pytest.raises(ValidationError, match="table_name"):
        EnvironmentSettings.model_validate(settings)


@pytest.mark.parametrize(
    ("cpu", "memory_mib", "refusal"),
    [
        (512, 512, "from 1024 to 4096 in steps of 1024"),
        (256, 768, "cpu 256 takes memory_mib 512, 1024, 2048"),
        (256, 1536, "cpu 256 takes memory_mib 512, 1024, 2048"),
        (512, 1536, "from 1024 to 4096 in steps of 1024"),
        (8192, 18432, "from 16384 to 61440 in steps of 4096"),
        (16384, 36864, "from 32768 to 122880 in steps of 8192"),
    ],
)
def test_a_size_inside_the_range_but_not_one_fargate_takes_is_refused(cpu: int, memory_mib: int, refusal: str) -> None:
    # ECS refuses these as the stack deploys ("Invalid 'cpu' setting for task"): synthesis must refuse them first
    with pytest.raises(ValidationError, match=refusal):
        WorkerSettings(image="x:1", cpu=cpu, memory_mib=memory_mib)


@pytest.mark.parametrize(("cpu", "memory_mib"), [(256, 512), (256, 2048), (512, 3072), (4096, 30720), (8192, 20480)])
def test_the_sizes_fargate_takes_are_taken(cpu: int, memory_mib: int) -> None:
    assert WorkerSettings(image="x:1", cpu=cpu, memory_mib=memory_mib).memory_mib == memory_mib


def test_fargate_sizes_and_zones_are_checked() -> None:
    with pytest.raises(ValidationError, match="nat_gateways"):
        EnvironmentSettings.model_validate(_settings(network={"nat_gateways": 3}))
    with pytest.raises(ValidationError, match="not all in eu-west-1"):
        EnvironmentSettings.model_validate(
            _settings(region="eu-west-1", network={"availability_zones": ["us-east-1a"], "nat_gateways": 1})
        )


def test_consumer_sizing_follows_the_groups_and_the_tick() -> None:
    assert consumer_timeout(1.0).to_seconds() == 65
    assert 60 < consumer_timeout(2.5).to_seconds() <= 70
    assert reserved_concurrency(4) == 8
    assert group_inputs(2) == [{"group": {"index": 0, "of": 2}}, {"group": {"index": 1, "of": 2}}]
    assert isinstance(consumer_timeout(1.0), Duration)


def test_log_retention_rounds_down_to_what_cloudwatch_accepts() -> None:
    assert retention(30).name == "ONE_MONTH"
    assert retention(45).name == "ONE_MONTH"
    assert retention(0).name == "ONE_DAY"


def test_functions_name_their_configuration_file_instead_of_carrying_it() -> None:
    from atf_cdk.constructs.function import CONFIG_FILE, function_environment

    config = StackConfig.model_validate({"name": "staging", "lambdas": {"work": {}}})
    assert function_environment("consumer", config) == {
        "ATF_CONFIG_FILE": CONFIG_FILE,
        "POWERTOOLS_SERVICE_NAME": "atf-consumer",
        "POWERTOOLS_METRICS_NAMESPACE": "ATF/staging",  # two environments in one account keep their metrics apart
    }


def test_a_worker_services_bounds_are_checked() -> None:
    with pytest.raises(ValidationError, match=r"min_tasks \(3\) exceeds max_tasks \(2\)"):
        WorkerSettings(min_tasks=3, max_tasks=2)
    assert WorkerSettings(min_tasks=0).service("greet").scaling.min_tasks == 0
    assert WorkerSettings().service("greet").lambdas == ["greet"]


def test_the_account_stacks_name_is_not_an_environments() -> None:
    settings = _settings(environment="account")
    settings["config"].update(name="atf-account", table_name="atf-account-tasks")
    with pytest.raises(ValidationError, match="the account stack's"):
        EnvironmentSettings.model_validate(settings)


def test_dev_reserves_no_concurrency_a_new_account_could_refuse() -> None:
    assert load_environment("dev").consumer.reserve_concurrency is False
    assert all(not worker.image for worker in load_environment("dev").workers.values())


def test_consumer_groups_follow_the_lambdas_planned_rates_unless_set() -> None:
    planned = _settings()
    planned["config"]["lambdas"]["greet"]["rate"] = 1_000  # 8 shards; 250 tasks/s a group at a full vCPU
    settings = EnvironmentSettings.model_validate({**planned, "consumer": {"memory_mib": 1769}})
    assert settings.props().consumer_groups == 4
    assert EnvironmentSettings.model_validate(_settings(consumer={})).props().consumer_groups == 1  # no rate: one
    # at 512 MiB a group sends ~72 tasks/s: fourteen groups for 8 shards is refused, naming what to change
    with pytest.raises(ValidationError, match=r"consumer\.memory_mib: 1000 tasks/s need 14 consumer groups"):
        EnvironmentSettings.model_validate({**planned, "consumer": {"memory_mib": 512}})
    # set explicitly, the groups are kept
    explicit = EnvironmentSettings.model_validate({**planned, "consumer": {"groups": 2, "memory_mib": 512}})
    assert explicit.props().consumer_groups == 2
