"""Benchmarks of the framework: cost per task, start-lag, throughput, capacity. `make bench` runs them all."""
