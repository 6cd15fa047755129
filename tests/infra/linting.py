"""cfn-lint as `cfnlint.api.lint_file` runs it, with its built-in rules loaded once per process.

lint_file builds a Runner for each template, and each Runner imports and instantiates every rule anew (~330
of them, ~0.7 s of CPU, more under load); the tests lint ~20 templates. The cfn-lint command handed several
templates loads the rules once and runs the one collection on each of them: each run configures every rule
for its own template, regions and checks (cfnlint.rules.Rules.run), so nothing of one template's run is
left in the next. This does the same across the tests of a worker.
"""

from __future__ import annotations

import functools
from pathlib import Path

from cfnlint.api import ManualArgs
from cfnlint.config import ConfigMixIn
from cfnlint.rules import Match, Rules
from cfnlint.runner import Runner
from cfnlint.runner.template import run_template_by_file_paths


@functools.cache
def _default_config() -> ConfigMixIn:
    return ConfigMixIn([])


@functools.cache
def _rules() -> Rules:
    """The rules a Runner loads for the default configuration (cfn-lint's own rules directory)."""
    return Runner(_default_config()).rules


def lint_file(template: Path, config: ManualArgs) -> list[Match]:
    """What cfnlint.api.lint_file(template, config) finds: its Runner's run of one template file, neither
    parameter nor deployment files, with the rules its Runner would load for `config`."""
    mixin = ConfigMixIn(["--template", str(template)], **config)
    assert not (mixin.append_rules != _default_config().append_rules or mixin.custom_rules), "rules of its own"
    assert template.is_file(), template  # lint_file answers a missing file with a match; the tests never lint one
    return list(run_template_by_file_paths(mixin, _rules()))
