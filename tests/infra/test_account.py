"""What an account holds once (atf-account) and what environments in one account must not fight over."""

from __future__ import annotations

import json
from typing import Any

from atf_cdk.account import ACCOUNT_STACK_NAME, PUSH_TO_CLOUDWATCH, WORKER_REPOSITORY
from atf_cdk.constructs.workers import NO_IMAGE

from tests.infra.conftest import Synthesized


def _account(synth: Synthesized) -> dict[str, Any]:
    return json.loads((synth.outdir / f"{ACCOUNT_STACK_NAME}.template.json").read_text())  # type: ignore[no-any-return]


def _of_type(template: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == type_}


def test_no_environment_sets_api_gateways_account_wide_logging_role(synth: Synthesized) -> None:
    assert synth.resources("AWS::ApiGateway::Account") == {}
    assert PUSH_TO_CLOUDWATCH not in json.dumps(synth.json)
    (api,) = synth.resources("AWS::ApiGateway::RestApi").values()
    assert "CloudWatchRole" not in json.dumps(api)


def test_the_account_stack_sets_it_once_with_the_role_it_creates(synth: Synthesized) -> None:
    account = _account(synth)
    (setting,) = _of_type(account, "AWS::ApiGateway::Account").values()
    (role_id, role), *others = _of_type(account, "AWS::IAM::Role").items()
    assert not others
    assert setting["Properties"]["CloudWatchRoleArn"] == {"Fn::GetAtt": [role_id, "Arn"]}
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "apigateway.amazonaws.com"
    }
    assert PUSH_TO_CLOUDWATCH in json.dumps(role["Properties"]["ManagedPolicyArns"])
    assert role["DeletionPolicy"] == "Retain"


def test_the_worker_image_repository_keeps_what_was_pushed(synth: Synthesized) -> None:
    (repository,) = _of_type(_account(synth), "AWS::ECR::Repository").values()
    props = repository["Properties"]
    assert props["RepositoryName"] == WORKER_REPOSITORY
    assert props["ImageTagMutability"] == "IMMUTABLE"
    assert props["ImageScanningConfiguration"] == {"ScanOnPush": True}
    assert repository["DeletionPolicy"] == "Retain"


def test_every_environment_deploys_the_same_account_stack(synthesized: dict[str, Synthesized]) -> None:
    """Deployed from any environment's context, it is the same template: a second deploy changes nothing."""
    templates = {env: _account(synth) for env, synth in synthesized.items()}
    first = next(iter(templates.values()))
    assert all(template == first for template in templates.values())


def test_an_environment_is_deployed_after_the_account_stack(synth: Synthesized) -> None:
    manifest = json.loads((synth.outdir / "manifest.json").read_text())
    assert ACCOUNT_STACK_NAME in manifest["artifacts"][synth.stack.stack_name]["dependencies"]


def test_services_pull_from_the_account_repository_even_before_an_image_exists(synth: Synthesized) -> None:
    """A worker without an image points at a tag no build has and runs no task, so nothing is pulled."""
    for name, worker in synth.settings.workers.items():
        family = f"{synth.settings.config.name}-{name}"
        (task,) = [
            t for t in synth.resources("AWS::ECS::TaskDefinition").values() if t["Properties"]["Family"] == family
        ]
        (container,) = task["Properties"]["ContainerDefinitions"]
        image = json.dumps(container["Image"])
        if worker.image is None:
            assert WORKER_REPOSITORY in image and NO_IMAGE.split(":")[1] in image
        elif worker.image.startswith(f"{WORKER_REPOSITORY}:"):
            assert WORKER_REPOSITORY in image and worker.image.split(":")[1] in image
