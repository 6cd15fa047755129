"""Where the code the constructs deploy comes from, in a checkout and in an installed atf-cdk.

- The Lambda handlers (the `functions` package) and the lock their layer installs from: in an
  installed atf-cdk they ship inside the package (atf_cdk/bundle/, put there by infra/pyproject.toml);
  in this repository's checkout they are the tree's own functions/ and requirements.lock.
- atf_core, the layer's code: the atf-core installed beside atf-cdk (an editable install in the checkout,
  so the layer holds the tree's layers/atf_core), with the dependencies its metadata declares.

No aws_cdk import here: a packaging test reads it from an installed wheel without the CDK.
"""

from __future__ import annotations

import re
from importlib.metadata import requires
from importlib.util import find_spec
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
BUNDLE = PACKAGE / "bundle"
CHECKOUT = PACKAGE.parents[1]  # infra/atf_cdk -> the repository, when run from a checkout
CORE_PACKAGE = "atf_core"
CORE_DISTRIBUTION = "atf-core"


def _shipped_or_checkout(name: str) -> Path:
    path = BUNDLE / name if BUNDLE.is_dir() else CHECKOUT / name
    if not path.exists():
        raise FileNotFoundError(f"atf-cdk cannot find {name}: not in {BUNDLE} (an installed atf-cdk) nor in {CHECKOUT}")
    return path


def functions_source() -> Path:
    """The directory holding the `functions` package's __init__.py and one package per function."""
    return _shipped_or_checkout("functions")


def lock_file() -> Path:
    """Every version the tests ran with: the layer installs its dependencies at these."""
    return _shipped_or_checkout("requirements.lock")


def core_source() -> Path:
    """The atf_core package directory the layer ships."""
    spec = find_spec(CORE_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"atf-cdk needs {CORE_DISTRIBUTION} installed: its layer ships {CORE_PACKAGE}")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def core_requirements() -> list[str]:
    """atf-core's declared dependencies (its extras left out), as its installed metadata lists them."""
    declared = requires(CORE_DISTRIBUTION) or []
    return [text.split(";")[0].strip() for text in declared if not re.search(r"\bextra\s*==", text)]
