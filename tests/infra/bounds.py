"""The project's declared requirements and its lock, read the way pip reads them.

`python -m tests.infra.bounds`, run by `make test-lowest` in the venv it resolved with
uv's lowest-direct strategy, checks that each direct requirement is installed at the
lower bound it declares. A bound that something else raises (another requirement needs a
newer version) is never what the tests run, so it is refused: raise it to what they run.
"""

from __future__ import annotations

import sys
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = ROOT / "requirements-dev.txt"
PACKAGES = ("layers", "sdk", "local", "infra")
LOCK = ROOT / "requirements.lock"
OWN = frozenset({"atf-core", "atf-sdk", "atf-local", "atf-cdk"})


def declared() -> list[tuple[str, Requirement]]:
    """Every direct requirement, with the file that declares it; the project's own packages left out."""
    found = [
        (REQUIREMENTS.name, Requirement(line.split("#")[0].strip()))
        for line in REQUIREMENTS.read_text().splitlines()
        if line.split("#")[0].strip()
    ]
    for package in PACKAGES:
        project = tomllib.loads((ROOT / package / "pyproject.toml").read_text())["project"]
        found += [(f"{package}/pyproject.toml", Requirement(text)) for text in project.get("dependencies", [])]
    return [(source, requirement) for source, requirement in found if canonicalize_name(requirement.name) not in OWN]


def locked(lock: Path = LOCK) -> dict[str, Version]:
    """The lock's pins that apply to this interpreter and platform (a universal lock may pin twice)."""
    pins = {}
    for line in lock.read_text().splitlines():
        if line and not line.startswith((" ", "#", "-")):
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate():
                (specifier,) = requirement.specifier
                pins[canonicalize_name(requirement.name)] = Version(specifier.version)
    return pins


def lower_bound(requirement: Requirement) -> Version | None:
    bounds = [Version(s.version) for s in requirement.specifier if s.operator in (">=", "==", "~=")]
    return max(bounds) if bounds else None


def untested_bounds() -> list[str]:
    """The declared lower bounds this environment does not run."""
    problems = []
    for source, requirement in declared():
        bound = lower_bound(requirement)
        try:
            installed = Version(version(requirement.name))
        except PackageNotFoundError:
            problems.append(f"{source}: {requirement} is not installed")
            continue
        if bound is None:
            problems.append(f"{source}: {requirement} has no lower bound")
        elif installed != bound:
            problems.append(f"{source}: {requirement} declares {bound}, but the lowest resolution installs {installed}")
    return problems


def main() -> None:
    problems = untested_bounds()
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        sys.exit("each lower bound must be a version the tests run: raise these to what is installed")
    print(f"{len(declared())} requirements, each installed at its declared lower bound")


if __name__ == "__main__":
    main()
