"""ksqlDB's own cases against the project: its statement cases (``statements``, run by
``python -m integration.conformance``), its whole functional-test suite (``ksql_suite``), the
records report of its query tests (``records_report``), the query tests outside the dev set
(``records_outside_dev``) and ksqlDB's test functions they load (``ksql_test_functions``)."""
