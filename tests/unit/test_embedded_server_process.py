"""What a process serving the embedded AWS changes in moto and in Python's collector, for speed only:
moto's answers, and what gets freed, stay the same."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest
from moto.core import responses, utils
from moto.dynamodb.responses import DynamoHandler
from moto.sqs.responses import SQSResponse

from atf_local.environment import REPO
from atf_local.servers import remember_actions


def test_a_services_actions_are_listed_once_as_moto_lists_them(monkeypatch: pytest.MonkeyPatch) -> None:
    module: Any = responses
    monkeypatch.setattr(module, "method_names_from_class", utils.method_names_from_class)
    # Given the actions remembered
    remember_actions()
    remember_actions()
    # Then each class's are moto's own, found once
    for handler in (DynamoHandler, SQSResponse, DynamoHandler):
        assert module.method_names_from_class(handler) == utils.method_names_from_class(handler)
    assert module.method_names_from_class.cache_info().misses == 2
    assert "update_item" in module.method_names_from_class(DynamoHandler)


FREEZING = """
import gc, weakref
from atf_local.servers import freeze_survivors

class Box:
    pass

freeze_survivors()
freeze_survivors()
kept = [Box() for _ in range(1000)]
before = gc.get_freeze_count()
gc.collect()
assert gc.get_freeze_count() >= before + 1000, (before, gc.get_freeze_count())  # survivors frozen, once
first = weakref.ref(kept[0])
del kept
assert first() is None  # still freed when the last reference goes
loop = Box()
loop.me = loop
looped = weakref.ref(loop)
del loop
gc.collect()
assert looped() is None  # a cycle made after the freeze is still collected
print("ok")
"""


def test_a_server_process_leaves_what_survived_a_full_collection_out_of_the_next() -> None:
    # Given a process like the stack's (its own: freezing would change the test process's collector)
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(FREEZING)], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    # Then what survived its full collection was frozen, and garbage is still freed
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr
