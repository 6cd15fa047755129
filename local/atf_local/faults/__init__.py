"""The guarantees suite: fault injection on the real local stack, and a history checker.

python -m atf_local.faults run              # every scenario and the ~10 min soak
python -m atf_local.faults run --ci         # the CI-sized subset
python -m atf_local.faults run --scenario 2 # one scenario
python -m atf_local.faults check RUN_DIR    # judge a kept run's history again
"""
