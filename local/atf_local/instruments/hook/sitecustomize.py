"""Python imports `sitecustomize` as it starts, from the first directory on sys.path that has one.

The fault harness puts this directory on PYTHONPATH for every process it
starts, so the instruments its environment asks for are attached before any
of the framework's code runs (atf_local.instruments.startup). A process whose
environment asks for none gets nothing.
"""

from atf_local.instruments.startup import install_from_env

install_from_env()
