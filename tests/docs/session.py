"""One document as one bash script: its blocks in order, as a reader who types along would run them.

Shell blocks run in one shell session (so an `export` or `ID=$(...)` carries on to later blocks), each
command announced on stderr with its place in the document, and the first failure ends the session.
A Python block runs as a script of its own (`python -`, the environment's python), so each must be
complete; a block with a title is written to that file. Servers (rules.py) run in the background and
are stopped when the document ends.
"""

from __future__ import annotations

import re
import shlex

from tests.docs.markdown import PYTHON, SHELL, Block
from tests.docs.rules import rule_for

PRELUDE = r"""
set -eo pipefail
set -m  # each background command leads a process group, so stopping it stops its children
__servers=()
__step() { printf '\n### %s (at %ss)\n' "$1" "$SECONDS" >&2; }
__skip() { printf '\n### %s: not run: %s\n' "$1" "$2" >&2; }
__start() {  # WHERE READY COMMAND: run COMMAND in the background until its output matches READY
  local where=$1 ready=$2 log pid
  log=$(mktemp "$ATF_DOC_LOGS/server.XXXX")
  (eval "$3") >"$log" 2>&1 &
  pid=$!
  __servers+=("$pid")
  for _ in $(seq 1 1200); do
    if grep -qE "$ready" "$log"; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then
      cat "$log" >&2; printf '### %s: exited before it was ready\n' "$where" >&2; return 1
    fi
    sleep 0.1
  done
  cat "$log" >&2; printf '### %s: not ready after 120 s\n' "$where" >&2; return 1
}
__stop() {  # PID: SIGTERM to its process group, SIGKILL after 15 s
  kill -TERM -- "-$1" 2>/dev/null || return 0
  for _ in $(seq 1 150); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL -- "-$1" 2>/dev/null || true
}
__stop_all() { local pid; for pid in "${__servers[@]}"; do __stop "$pid"; done; }
trap __stop_all EXIT
"""
_SAFE_PATH = re.compile(r"^[~\w./-]+$")


def script(blocks: list[Block]) -> str:
    parts = [PRELUDE]
    for block in blocks:
        if block.skip is not None:
            parts.append(f"__skip {shlex.quote(block.where)} {shlex.quote(block.skip)}")
        elif block.file is not None:
            parts.append(_file(block))
        elif block.language in SHELL:
            parts += [_command(block, line, command) for line, command in commands(block)]
        elif block.language in PYTHON:
            parts.append(f"__step {shlex.quote(block.where + ' (python)')}\n{_heredoc('python -', block.text)}")
    return "\n".join(parts) + "\n"


def commands(block: Block) -> list[tuple[int, str]]:
    """The block's commands with their lines: a line ending in a backslash continues on the next."""
    found: list[tuple[int, str]] = []
    pending: list[str] = []
    for offset, line in enumerate(block.text.splitlines(), start=1):
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending.append(line)
        if not line.endswith("\\"):
            found.append((block.line + offset - len(pending) + 1, "\n".join(pending)))
            pending = []
    if pending:
        raise ValueError(f"{block.where}: the last command ends in a backslash")
    return found


def _command(block: Block, line: int, command: str) -> str:
    where = shlex.quote(f"{block.doc}:{line}")
    rule = rule_for(command)
    if rule.mode == "skip":
        return f"__skip {where} {shlex.quote(rule.why)}"
    if rule.mode == "serve":
        return f"__step {where}\n__start {where} {shlex.quote(rule.ready)} {shlex.quote(command)}"
    if rule.mode == "start":
        started = f"__start {where} {shlex.quote(rule.ready)} {shlex.quote(command)}"
        return f'__step {where}\n{started}\n__stop "${{__servers[-1]}}"; unset "__servers[-1]"'
    return f"__step {where}\n{command}"


def _file(block: Block) -> str:
    path = block.file or ""
    if not _SAFE_PATH.match(path):
        raise ValueError(f"{block.where}: title {path!r}: a file name of letters, digits, ~ . _ / - only")
    where = shlex.quote(f"{block.where} (the file {path})")
    return f'__step {where}\nmkdir -p "$(dirname {path})"\n{_heredoc(f"cat > {path}", block.text)}'


def _heredoc(command: str, text: str) -> str:
    end = "ATF_DOC_END"
    if re.search(rf"^{end}$", text, flags=re.MULTILINE):
        raise ValueError(f"a block contains the line {end}")
    return f"{command} <<'{end}'\n{text}{end}"
