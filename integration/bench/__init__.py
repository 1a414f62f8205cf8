"""Benchmarks: ``python -m integration.bench [NAME ...] [--quick] [--json]``."""
