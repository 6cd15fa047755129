"""Build the framework's wheels from a copy of the tree, and make fresh virtual environments from them.

Shared by the packaging test and `python -m tests.packaging.sizes`. The sources are copied first
(pip builds a local directory in place, and the tree must not gain build/ or *.egg-info meanwhile);
pip's cache serves the build backends and the dependencies, so only the first run downloads.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("layers", "sdk", "infra")  # atf-core, atf-sdk, atf-cdk
VERSION = "0.1.0"
_IGNORE = shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "*.pyc", "node_modules", "cdk.out")


def build_wheels(work: Path) -> Path:
    """atf-core's, atf-sdk's and atf-cdk's wheels in work/wheels. infra's wheel takes ../functions and
    ../requirements.lock (its pyproject's force-include), so those are copied beside it."""
    source = work / "source"
    for name in (*PACKAGES, "functions"):
        shutil.copytree(ROOT / name, source / name, ignore=_IGNORE, symlinks=False)
    shutil.copy2(ROOT / "requirements.lock", source / "requirements.lock")
    shutil.copy2(ROOT / "LICENSE", source / "LICENSE")
    wheels = work / "wheels"
    pip(sys.executable, "wheel", "--no-deps", "--wheel-dir", str(wheels), *(str(source / p) for p in PACKAGES))
    return wheels


def fresh_venv(path: Path) -> Path:
    """A virtual environment of this Python with nothing of the repository's: its python."""
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(path)], check=True)
    return path / "bin" / "python"


def install(python: Path, wheels: Path, *requirements: str) -> None:
    pip(str(python), "install", "--find-links", str(wheels), *requirements)


def pip(python: str, *args: str) -> None:
    command = [python, "-m", "pip", "--disable-pip-version-check", "--quiet", *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}")


def site_packages_kib(python: Path) -> int:
    """What the packages installed in the venv take, pip (and setuptools) of a bare venv left out."""
    script = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    purelib = Path(
        subprocess.run([str(python), "-c", script], capture_output=True, text=True, check=True).stdout.strip()
    )
    bare = ("pip", "setuptools", "_distutils_hack", "distutils-precedence.pth")
    total = 0
    for entry in purelib.iterdir():
        if entry.name.startswith(bare) or entry.name == "__pycache__":
            continue
        files = [entry] if entry.is_file() else [f for f in entry.rglob("*") if f.is_file()]
        total += sum(f.stat().st_size for f in files)
    return total // 1024
