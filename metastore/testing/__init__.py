"""ksqlDB's query tests run on the project's runtime: ``metastore test`` (see docs/conformance.md)."""
