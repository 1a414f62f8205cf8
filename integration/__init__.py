"""Multi-process cluster tests, benchmarks, and the bootstrap that installs and runs everything."""
