"""What `help()` tells a lambda owner matches what the framework does."""

from __future__ import annotations

from atf_core import lifecycle
from atf_core.config import LambdaSpec
from atf_sdk import Fatal


def test_fatal_names_where_a_task_ends_by_default() -> None:
    default = LambdaSpec()
    ends_in = (lifecycle.FAIL_TO_DEAD_LETTER if default.dead_letter else lifecycle.FAIL_FATAL).target
    other = lifecycle.FAIL_FATAL.target if default.dead_letter else lifecycle.FAIL_TO_DEAD_LETTER.target
    doc = " ".join((Fatal.__doc__ or "").split())
    first_sentence = doc.split(". ")[0]
    assert ends_in.value in first_sentence, doc
    assert other.value not in first_sentence, doc
    assert f"dead_letter: {str(not default.dead_letter).lower()}" in doc, "and says how to get the other outcome"
