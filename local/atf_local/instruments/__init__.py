"""Test and measurement instruments, attached to the framework's processes from outside.

Nothing here ships: the Lambda layer, the function packages and the SDK wheel
hold none of it, and the framework's code neither imports it nor reads its
environment variables. What attaches it:

- botocore event hooks on the boto3 clients of a process: fault injection
  (faults.py) and the history of state writes and sends (wire.py);
- a start-up hook (hook/sitecustomize.py, through startup.py) that the fault
  harness and the benchmarks put on their child processes' PYTHONPATH: it hooks
  every client the process creates and, when asked, shifts the process's clock
  through atf_core.clock's one seam;
- a registry for test callbacks that records when each ran (executions.py);
- the history files all of them write (history.py), which the checker reads.
"""
