"""`atf cost`, and the meter and price list it and the benchmarks bill AWS calls with.

- billing.py: AWS's billing rules as a botocore hook (CostMeter), and the list prices;
- lifecycles.py: the lifecycles priced, run by the framework's own components on an embedded AWS;
- estimate.py: the assumptions;
- report.py: the per-task figures and how they print;
- command.py: the `atf cost` verb (found by the CLI through the `atf.commands` entry point).

They live with the local stack, not in the SDK, because they need moto and are
measuring tools: the SDK wheel and the Lambda layer ship none of them.
"""
