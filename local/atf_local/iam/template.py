"""The CDK app's template for a local stack's configuration, synthesized once per input and cached.

The local stack's configuration is synthesized as an environment of its own ("local"): a worker
service per lambda, one consumer group. The
template is flattened: each nested stack's resources join the parent's, their logical ids prefixed
with the nested stack's, and the references between them replaced by what they refer to.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.metadata
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atf_core.config import StackConfig
from atf_local.environment import REPO
from atf_local.iam.synth_service import SynthService

if TYPE_CHECKING:
    from aws_cdk import Stack

CACHE_DIR = REPO / ".cache" / "iam"
# What the template is made of: the CDK app, the code whose declarations its grants derive from, the
# feature flags. A change to any of them synthesizes again.
SOURCES = ("infra/atf_cdk", "layers/atf_core", "sdk/atf_sdk", "functions")
FLAGS = "cdk.json"
LOCAL_ENVIRONMENT = "local"


def template_for(config: StackConfig) -> dict[str, Any]:
    """The flattened template for `config`, from the cache or synthesized by the synthesis service
    (~10 s where it has to start, ~1 s more for each configuration after)."""
    sources = _sources_digest()
    cached = CACHE_DIR / f"{_inputs_hash(config, sources)}.json"
    if not cached.is_file():
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        synth_service(sources).synthesize(config.model_dump_json(), cached)
    return json.loads(cached.read_text())  # type: ignore[no-any-return]


def synth_service(sources: str | None = None) -> SynthService:
    """The synthesis service for this checkout, this environment and these sources. The environment by its
    resolved prefix: a copy of the checkout made of links (the documents' and the plugin's tests) runs the
    same packages through another path, and shares the service."""
    environment = Path(sys.prefix).resolve()
    owner = hashlib.sha256(f"{REPO}\0{environment}\0{sources or _sources_digest()}".encode()).hexdigest()[:16]
    # The address in the temporary directory: a Unix socket's path is at most ~100 bytes, a checkout's is not.
    address = Path(tempfile.gettempdir()) / f"atf-synth-{owner}.sock"
    return SynthService(
        address=address,
        lock=CACHE_DIR / f"synth-{owner}.lock",
        log=CACHE_DIR / "synth-service.log",
        cwd=REPO,
        env=_synth_env(),
    )


def _synth_env() -> dict[str, str]:
    paths = [str(REPO / "infra"), str(REPO / "layers"), str(REPO)]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1"}


def _sources_digest() -> str:
    """What a template is made of besides its configuration: the CDK app and the code whose declarations its
    grants derive from, the feature flags, and the aws-cdk-lib that synthesizes (make test-lowest's is older)."""
    digest = hashlib.sha256(importlib.metadata.version("aws-cdk-lib").encode())
    files = [REPO / FLAGS, *sorted(p for s in SOURCES for p in (REPO / s).rglob("*.py"))]
    for path in files:
        digest.update(str(path.relative_to(REPO)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _inputs_hash(config: StackConfig, sources: str) -> str:
    return hashlib.sha256(f"{config.model_dump_json()}\0{sources}".encode()).hexdigest()[:24]


def cdk_context(env: str) -> dict[str, Any]:
    """cdk.json's context (its feature flags) as the CLI would pass it, the environment, and the layer
    bundled from source, so that nothing is downloaded."""
    from atf_cdk.constructs.layer import BUNDLING_CONTEXT

    context = json.loads((REPO / FLAGS).read_text())["context"]
    return {**context, "env": env, BUNDLING_CONTEXT: "source"}


def nested_templates(stack: Stack) -> dict[str, str]:
    """Each nested stack's template file, by its resource's logical id in the parent."""
    from aws_cdk import NestedStack

    found = {}
    for construct in stack.node.find_all():
        if isinstance(construct, NestedStack) and construct.nested_stack_parent is stack:
            resource = construct.nested_stack_resource
            assert resource is not None
            found[stack.get_logical_id(resource)] = construct.template_file
    return found


def _rewrite(node: Any, local: set[str], prefix: str, parameters: dict[str, Any]) -> Any:
    """A nested template's part in the parent's terms."""
    if isinstance(node, list):
        return [_rewrite(item, local, prefix, parameters) for item in node]
    if not isinstance(node, dict):
        return node
    if set(node) == {"Ref"} and node["Ref"] in parameters:
        return copy.deepcopy(parameters[node["Ref"]])
    if set(node) == {"Ref"} and node["Ref"] in local:
        return {"Ref": prefix + node["Ref"]}
    if set(node) == {"Fn::GetAtt"} and node["Fn::GetAtt"][0] in local:
        return {"Fn::GetAtt": [prefix + node["Fn::GetAtt"][0], *node["Fn::GetAtt"][1:]]}
    rewritten = {key: _rewrite(value, local, prefix, parameters) for key, value in node.items()}
    if "DependsOn" in node and "Type" in node:
        depends = node["DependsOn"] if isinstance(node["DependsOn"], list) else [node["DependsOn"]]
        rewritten["DependsOn"] = [prefix + d if d in local else d for d in depends]
    return rewritten


def _resolve_outputs(node: Any, outputs: dict[str, dict[str, Any]]) -> Any:
    """The parent's references to nested outputs, replaced by the outputs' values."""
    if isinstance(node, list):
        return [_resolve_outputs(item, outputs) for item in node]
    if not isinstance(node, dict):
        return node
    if set(node) == {"Fn::GetAtt"} and node["Fn::GetAtt"][0] in outputs:
        stack_id, attribute = node["Fn::GetAtt"]
        return copy.deepcopy(outputs[stack_id][attribute.removeprefix("Outputs.")]["Value"])
    return {key: _resolve_outputs(value, outputs) for key, value in node.items()}


def flatten(outdir: Path, stack: Stack) -> dict[str, Any]:
    """The stack's template with its nested stacks' resources in it (see the module's docstring)."""
    parent = json.loads((outdir / stack.template_file).read_text())
    nested = nested_templates(stack)
    resources = {k: v for k, v in parent["Resources"].items() if k not in nested}
    outputs: dict[str, dict[str, Any]] = {}
    for stack_id, file_name in nested.items():
        template = json.loads((outdir / file_name).read_text())
        parameters = parent["Resources"][stack_id]["Properties"].get("Parameters", {})
        prefix = f"{stack_id}."
        rewritten = _rewrite(template, set(template["Resources"]), prefix, parameters)
        clashes = set(resources) & {prefix + k for k in rewritten["Resources"]}
        assert not clashes, clashes
        resources.update({prefix + k: v for k, v in rewritten["Resources"].items()})
        outputs[stack_id] = rewritten.get("Outputs", {})
    return _resolve_outputs({**parent, "Resources": resources}, outputs)  # type: ignore[no-any-return]
