"""`make run`'s demo, IAM enforced: the task mix, a periodic schedule and a two-link chain all end as
expected, and no component was refused a call (a grant missing from the template fails here by name)."""

from __future__ import annotations

import os
import subprocess
import sys

from atf_local.environment import REPO
from atf_local.stack import free_port


def test_the_demo_runs_under_the_deployed_roles() -> None:
    command = [sys.executable, "-m", "atf_local", "demo", "--aws-port", str(free_port())]
    command += ["--api-port", str(free_port())]
    env = {**os.environ, "PYTHONPATH": f"{REPO}:{REPO / 'local'}", "COLUMNS": "200"}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=400)
    output = done.stdout + done.stderr
    denied = sorted({line.strip() for line in output.splitlines() if "IAM denied:" in line})
    assert not denied, "components were refused calls:\n" + "\n".join(denied)
    assert done.returncode == 0, output[-3000:]
    assert "All tasks reached their expected states." in output
    assert "schedule fired" in output and "chain succeeded" in output
