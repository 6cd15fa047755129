"""Every command of README.md and docs/*.md runs as written, against the local stack it starts.

Each document is one session (tests/docs/session.py) in a sandbox of its own (tests/docs/sandbox.py):
a network namespace, so the documented ports (4566, 8080, 8081) are free whatever else runs here,
and a process namespace, so nothing it started outlives it. The session runs in a copy of the
repository made of links (files a document writes stay out of the tree), with HOME a fresh
directory and the repository's environment on PATH, as `. .venv/bin/activate` would put it. What is
not run, and why, is in tests/docs/rules.py and in a document's `<!-- doc-test: skip ... -->` markers.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.docs.markdown import SHELL, blocks
from tests.docs.rules import rule_for
from tests.docs.session import commands, script

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SANDBOX = ["unshare", "--net", "--pid", "--fork", "--mount-proc", "--map-root-user", "--kill-child"]
SESSION_TIMEOUT_S = 420  # a ceiling for a loaded machine: a session takes 20-80 s on a quiet one


RUNNABLE = [d for d in DOCUMENTS if any(block.runs for block in blocks(d, REPO))]
AT_ONCE = 3  # sessions side by side: each starts a stack and a worker host; more would only queue for CPU


@dataclass
class Outcome:
    returncode: int | None  # None: killed at the timeout
    output: str


def _sandbox_refused() -> str | None:
    if shutil.which("unshare") is None:
        return "no unshare (util-linux) on this machine"
    probe = subprocess.run([*SANDBOX, "true"], capture_output=True, text=True, check=False)
    return None if probe.returncode == 0 else f"unshare refused a private namespace: {probe.stderr.strip()}"


@pytest.fixture(scope="module")
def sessions(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[Path, Future[Outcome]]]:
    """The selected documents' sessions, AT_ONCE at a time, started when the first one's test runs."""
    refused = _sandbox_refused()
    if refused:
        # A failure, not a skip: a machine that cannot sandbox the documents must not pass them unread.
        pytest.fail(f"the documents' sessions need namespaces of their own: {refused}")
    selected: list[Path] = []
    for item in request.session.items:
        if isinstance(item, pytest.Function) and item.originalname == "test_every_command_runs_as_written":
            document = item.callspec.params["document"]
            assert isinstance(document, Path)
            selected.append(document)
    with ThreadPoolExecutor(max_workers=AT_ONCE) as pool:
        yield {doc: pool.submit(_session, doc, tmp_path_factory.mktemp(doc.stem)) for doc in selected}


def _session(document: Path, tmp_path: Path) -> Outcome:
    tree, env = _workspace(tmp_path)
    session, log = tmp_path / "session.sh", tmp_path / "session.log"
    session.write_text(script(blocks(document, REPO)))
    command = [*SANDBOX, sys.executable, str(REPO / "tests" / "docs" / "sandbox.py"), "bash", str(session)]
    with log.open("w") as out:
        process = subprocess.Popen(command, cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
        try:
            returncode: int | None = process.wait(timeout=SESSION_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.terminate()  # unshare --kill-child: the whole sandbox goes with it
            process.wait()
            returncode = None
    return Outcome(returncode, log.read_text(errors="replace"))


def _workspace(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of the repository made of links, and the environment of a reader's fresh terminal."""
    tree = tmp_path / "repository"
    tree.mkdir()
    for entry in REPO.iterdir():
        if entry.name != ".git":
            (tree / entry.name).symlink_to(entry)
    for name in ("home", "logs"):
        (tmp_path / name).mkdir()
    inherited = ("ATF_", "AWS_", "PYTEST_", "MAKE", "MFLAGS")  # `make test` runs this: its make is not the reader's
    env = {k: v for k, v in os.environ.items() if not k.startswith(inherited)}
    env.update(
        HOME=str(tmp_path / "home"),
        PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}",
        ATF_DOC_LOGS=str(tmp_path / "logs"),
    )
    return tree, env


@pytest.mark.timeout(SESSION_TIMEOUT_S + 60)
@pytest.mark.parametrize("document", RUNNABLE, ids=lambda d: d.name)
def test_every_command_runs_as_written(document: Path, sessions: dict[Path, Future[Outcome]]) -> None:
    outcome = sessions[document].result()
    tail = "\n".join(outcome.output.splitlines()[-150:])
    assert outcome.returncode is not None, f"{document.name}: the session took over {SESSION_TIMEOUT_S} s\n{tail}"
    assert outcome.returncode == 0, f"{document.name}: a command failed (the last ### names it)\n{tail}"


def test_every_block_says_what_it_is() -> None:
    """An untagged fence would be neither run nor skipped with a reason: each says sh, python, text, ..."""
    untagged = [block.where for document in DOCUMENTS for block in blocks(document, REPO) if not block.info]
    assert not untagged, f"fenced blocks without a language (sh, python, text, json, ...): {untagged}"


def test_what_is_not_run_says_why() -> None:
    reasons = {}
    for document in DOCUMENTS:
        for block in blocks(document, REPO):
            if block.skip is not None:
                reasons[block.where] = block.skip
            elif block.language in SHELL and block.file is None:
                reasons |= {
                    f"{block.doc}:{n}": rule_for(c).why for n, c in commands(block) if rule_for(c).mode == "skip"
                }
    assert all(len(why.split()) >= 3 for why in reasons.values()), reasons
    assert any("AWS account" in why for why in reasons.values()), "deploy.md's cdk commands are skipped by rule"


def test_the_sessions_run_python_and_write_files(tmp_path: Path) -> None:
    """The session builder on a document of each kind of block (no stack: fast, and it shows the rules)."""
    doc = tmp_path / "doc.md"
    doc.write_text(
        '```python title="~/x/hello.py"\nprint("from a file")\n```\n\n'
        "```sh\nexport WHO=doc\npython ~/x/hello.py\ncdk deploy -c env=prod\n```\n\n"
        '```python\nimport os\nprint("python sees", os.environ["WHO"])\n```\n\n'
        "<!-- doc-test: skip needs a browser -->\n```sh\nopen http://127.0.0.1:8081\n```\n\n"
        "```text\nnot run\n```\n"
    )
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "ATF_DOC_LOGS": str(tmp_path)}
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    ran = subprocess.run(["bash", "-c", script(blocks(doc, tmp_path))], env=env, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == ["from a file", "python sees doc"]
    assert "doc.md:8: not run: needs an AWS account" in ran.stderr
    assert "doc.md:17: not run: needs a browser" in ran.stderr
    failing = script(blocks(doc, tmp_path)).replace("export WHO=doc", "false")
    ran = subprocess.run(["bash", "-c", failing], env=env, capture_output=True, text=True)
    assert ran.returncode != 0 and "from a file" not in ran.stdout
    assert re.search(r"### doc.md:6 \(at \d+s\)$", ran.stderr.rstrip()), ran.stderr


@pytest.mark.parametrize(
    ("command", "mode"),
    [
        ("make run", "start"),
        ("make serve CONFIG=$HOME/atf-tutorial/mystack.json", "serve"),
        ("ATF_AWS_ENDPOINT=http://127.0.0.1:4566 atf worker mylambdas:lambdas --config mystack.json", "serve"),
        (".venv/bin/python -m pytest tests/api", "skip"),
        ("make test   # everything", "skip"),
        ("cdk deploy -c env=staging", "skip"),
        ("atf top --console-url http://127.0.0.1:8081", "skip"),
        ("atf top --console-url http://127.0.0.1:8081 --once", "run"),
        ('atf schedule greet --payload \'{"name": "Bea"}\'   # cdk in a comment', "run"),
    ],
)
def test_rules(command: str, mode: str) -> None:
    assert rule_for(command).mode == mode
