"""A query's failure as a node and ``metastore test`` report it: one line, Spark's first, with
the innermost cause its text names (a stage failure's own first line names only the wrapper)."""

from __future__ import annotations

from metastore.runtime.job import failure_text

STAGE_FAILURE = """Job aborted due to stage failure: Task 0 in stage 7.0 failed 1 times, most \
recent failure: Lost task 0.0 in stage 7.0 (TID 7) (host executor driver): \
java.lang.reflect.InvocationTargetException
\tat java.base/jdk.internal.reflect.NativeMethodAccessorImpl.invoke0(Native Method)
Caused by: java.lang.IllegalStateException: the Schema Registry answered 500
\tat io.metastore.avro.RegistryCalls.call(RegistryCalls.java:170)
Caused by: java.net.ConnectException: Connection refused
\tat java.base/sun.nio.ch.Net.pollConnect(Native Method)
"""


def test_the_first_line_and_the_innermost_cause() -> None:
    assert failure_text(STAGE_FAILURE) == (
        "Job aborted due to stage failure: Task 0 in stage 7.0 failed 1 times, most recent "
        "failure: Lost task 0.0 in stage 7.0 (TID 7) (host executor driver): "
        "java.lang.reflect.InvocationTargetException (caused by java.net.ConnectException: "
        "Connection refused)")


def test_a_failure_without_a_cause_is_its_first_line() -> None:
    assert failure_text("\n  Query stopped: x\n\tat y\n") == "Query stopped: x"
    assert failure_text("boom\nCaused by: boom") == "boom"
    assert failure_text("") == ""
    assert len(failure_text("x" * 5000 + "\nCaused by: " + "y" * 5000)) <= 1000
