"""Errors ksqlDB reports at a node's location carry it as fields too, not only in the message."""

from __future__ import annotations

import pytest

from metastore.catalog.exceptions import StatementError
from metastore.catalog.image import EMPTY_IMAGE
from metastore.engine.validation import Validator
from metastore.sql.parser import parse
from metastore.testing.check import AssumedTopics

SCRIPT = """CREATE STREAM S (ID INT KEY, A INT) WITH (kafka_topic='s', value_format='JSON');
CREATE STREAM X AS SELECT ID,
    NOPE FROM S;"""


def test_unknown_column_carries_line_and_column() -> None:
    validator = Validator(EMPTY_IMAGE, AssumedTopics())
    create, query = parse(SCRIPT)
    validator.validate(create)
    with pytest.raises(StatementError) as raised:
        validator.validate(query)
    assert (raised.value.line, raised.value.column) == (3, 5)
    assert raised.value.message.startswith("Line: 3, Col: 5: SELECT column 'NOPE'")


def test_errors_without_a_location_have_none() -> None:
    error = StatementError("Some refusal")
    assert (error.line, error.column, error.message) == (None, None, "Some refusal")
