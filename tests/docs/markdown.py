"""The fenced code blocks of a Markdown document, with what the doc test needs to know of each.

A block's info string says what it is: `sh` (or `bash`, `shell`) is commands, `python` a script,
anything else (`text`, `json`, ...) is shown, not run. `title="PATH"` on any block makes it the
content of the file PATH instead (the reader saves it; the test writes it). A line
`<!-- doc-test: skip REASON -->` right before a block keeps the test from running it, and says why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SHELL = frozenset({"sh", "bash", "shell"})
PYTHON = frozenset({"python", "py"})
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+)(?P<info>.*)$")
_TITLE = re.compile(r'\btitle="(?P<path>[^"]+)"')
_SKIP = re.compile(r"^\s*<!--\s*doc-test:\s*skip\b[:\s]*(?P<reason>.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    doc: str  # the document's path, relative to the repository
    line: int  # the opening fence's line, from 1
    info: str
    text: str
    skip: str | None = None  # the reason a marker gives for not running it

    @property
    def language(self) -> str:
        return self.info.split()[0] if self.info.split() else ""

    @property
    def file(self) -> str | None:
        match = _TITLE.search(self.info)
        return match.group("path") if match else None

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.skip is None and (self.file is not None or self.language in SHELL | PYTHON)


def blocks(path: Path, root: Path) -> list[Block]:
    """Every fenced block of the document, in order; an unclosed fence is an error."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        end = next((i for i in range(index + 1, len(lines)) if lines[i].strip() == fence), None)
        if end is None:
            raise ValueError(f"{path.relative_to(root)}:{index + 1}: a fence that is never closed")
        body = "\n".join(line[indent:] if line[:indent].isspace() else line for line in lines[index + 1 : end])
        marker = _SKIP.match(_previous_text(lines, index))
        found.append(
            Block(
                doc=str(path.relative_to(root)),
                line=index + 1,
                info=opening["info"].strip(),
                text=body + "\n",
                skip=(marker["reason"] or "no reason given") if marker else None,
            )
        )
        index = end + 1
    return found


def _previous_text(lines: list[str], index: int) -> str:
    for line in reversed(lines[:index]):
        if line.strip():
            return line
    return ""
