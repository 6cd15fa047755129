"""The benchmarks' start-up hook: Python imports `sitecustomize` as it starts.

The benchmarks put this directory on PYTHONPATH for the processes of the local
stack and the worker host, with the checkout on it too. Each process gets the
instruments its environment asks for (atf_local.instruments.startup: the
history of state writes and sends) and, with BENCH_METER_DIR set, the meter of
its AWS calls (bench/meter.py). A host's executors fork from its fork server,
which ran this once for all of them (see bench/meter.py for what that asks).
"""

import os
from pathlib import Path

from atf_local.instruments.startup import install_from_env
from bench.meter import METER_ENV, meter_this_process

install_from_env()
if os.environ.get(METER_ENV):
    meter_this_process(Path(os.environ[METER_ENV]))
