"""Which documented commands the doc test does not simply run, and why.

Every shell command of README.md and docs/*.md runs as written, in order, except those a rule here
names. A rule matches the command's words (leading VAR=value assignments dropped, a program named by
its path, like .venv/bin/python, by its file name). The first rule that matches decides:

- `skip`: not run; the reason is printed where the command would have run.
- `serve`: a server the later commands use: started in the background, ready once its output matches
  `ready`, stopped (SIGTERM to its process group) when the document ends.
- `start`: started as `serve` is, checked ready, and stopped at once: it would run for minutes.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Literal

Mode = Literal["run", "skip", "serve", "start"]


@dataclass(frozen=True)
class Rule:
    pattern: str
    mode: Mode
    why: str
    ready: str = ""  # an extended regular expression on the command's output, for serve and start

    def matches(self, words: str) -> bool:
        return re.search(self.pattern, words) is not None


RULES = [
    Rule(r"^(cdk|aws)\b", "skip", "needs an AWS account (tests/infra synthesizes and checks the CDK app)"),
    Rule(r"^docker\b", "skip", "needs a Docker engine and a registry"),
    Rule(
        r"^make (test|bench|faults)\b|^python -m (pytest|bench|atf_local\.faults)\b|^pytest\b",
        "skip",
        "a test or benchmark suite of its own, minutes long (`make test` runs the tests, this one among them)",
    ),
    Rule(
        r"^python -m functions\.frontend\.openapi_file\b",
        "skip",
        "rewrites the committed OpenAPI document; tests/api/test_openapi.py checks that it has not drifted",
    ),
    Rule(r"^atf top\b(?!.*--once)", "skip", "interactive until q; the document's `atf top ... --once` draws a frame"),
    Rule(
        r"^make run\b",
        "start",
        "the demo runs about a minute and checks itself: started until its worker host is up, then stopped",
        ready="Worker host started",
    ),
    Rule(r"^make serve\b|^python -m atf_local serve\b", "serve", "serves until interrupted", "ATF local stack ready"),
    Rule(r"^atf worker\b", "serve", "a worker host serves until SIGTERM", ready="worker host ready"),
]
RUN = Rule("", "run", "")


def command_words(command: str) -> str:
    """The words a rule matches: no assignments in front, the program by its file name, no comment."""
    try:
        words = shlex.split(command.replace("\\\n", " "), comments=True)
    except ValueError:  # an unbalanced quote: the shell will say so when it runs
        words = command.split()
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words.pop(0)
    if words:
        words[0] = words[0].rsplit("/", 1)[-1]
    return " ".join(words)


def rule_for(command: str) -> Rule:
    words = command_words(command)
    return next((rule for rule in RULES if rule.matches(words)), RUN)
