"""The size of each install of atf-sdk in a fresh virtual environment: `python -m tests.packaging.sizes`.

Client only, [worker], [cli], and all extras ([async,cli,worker]); each a venv of its own in a
temporary directory, from the wheels built from this tree and the rest from pip's index (or cache).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from tests.packaging.wheels import VERSION, build_wheels, fresh_venv, install, site_packages_kib

INSTALLS = {
    "client only": "",
    "[worker]": "[worker]",
    "[cli]": "[cli]",
    "all ([async,cli,worker])": "[async,cli,worker]",
}


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="atf-sizes-") as directory:
        work = Path(directory)
        wheels = build_wheels(work)
        print("| install | site-packages |")
        print("|---|---|")
        for number, (label, extras) in enumerate(INSTALLS.items()):
            python = fresh_venv(work / f"venv{number}")
            install(python, wheels, f"atf-sdk{extras}=={VERSION}")
            print(
                f"| `pip install 'atf-sdk{extras}'` ({label}) | {site_packages_kib(python) / 1024:.1f} MiB |",
                flush=True,
            )


if __name__ == "__main__":
    main()
