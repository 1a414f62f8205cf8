"""Validation rules and their ksqlDB wording, on the offline catalog (no Kafka)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from metastore.catalog import exceptions as errors
from metastore.catalog.image import EMPTY_IMAGE, Delta, Image
from metastore.engine.validation import Read, Skip, TopicSpec, Validator, Write
from metastore.functions import operators
from metastore.planner.support import check_runtime
from metastore.sql import types as ty
from metastore.sql.parser import parse
from metastore.testing.check import run_script

BASE = """
CREATE STREAM PV (ID INT KEY, URL STRING, N INT) WITH (KAFKA_TOPIC='pv', VALUE_FORMAT='JSON');
CREATE TABLE USERS (ID INT PRIMARY KEY, NAME STRING) WITH (KAFKA_TOPIC='users', VALUE_FORMAT='JSON');
"""


class Topics:
    def __init__(self, existing: dict[str, int]) -> None:
        self.existing = existing

    def partitions(self, topic: str) -> int | None:
        return self.existing.get(topic)

    def broker_count(self) -> int | None:
        return 3


def catalog(script: str = BASE) -> Image:
    results, image = run_script(script)
    assert all(r.ok for r in results), [r.message for r in results if not r.ok]
    return image


def fail(statement: str, image: Image | None = None, topics: dict[str, int] | None = None) -> str:
    validator = Validator(image or catalog(), Topics(topics or {"pv": 1, "users": 1, "t": 1}),
                          runtime_check=check_runtime)
    with pytest.raises(errors.StatementError) as raised:
        for parsed in parse(statement):
            validator.validate(parsed)
    return raised.value.message


@pytest.mark.parametrize(("statement", "message"), [
    ("CREATE STREAM PV (A INT) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON');",
     "Cannot add stream 'PV': A stream with the same name already exists"),
    ("CREATE STREAM USERS (A INT) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON');",
     "Cannot add stream 'USERS': A table with the same name already exists"),
    ("CREATE TABLE T (A INT) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON');",
     "Tables require a PRIMARY KEY. Please define the PRIMARY KEY."),
    ("CREATE STREAM S (K INT PRIMARY KEY) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON');",
     "Column `K` is a 'PRIMARY KEY' column: please use 'KEY' for streams."),
    ("CREATE STREAM S (A INT) WITH (KAFKA_TOPIC='t');", "is missing the 'VALUE_FORMAT' property"),
    ("CREATE STREAM S (A INT) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='FOO');", "Unknown format: FOO"),
    ("CREATE STREAM S (A BOOLEAN) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='KAFKA');",
     "The 'KAFKA' format does not support type 'BOOLEAN'"),
    ("CREATE STREAM S (A ARRAY<INT>) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='DELIMITED');",
     "The 'DELIMITED' format does not support type 'ARRAY'"),
    ("CREATE STREAM S (A MAP<INT, INT>) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON');",
     "JSON only supports MAP types with STRING keys"),
    ("CREATE STREAM S (A UNKNOWN_T) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON');",
     "Cannot resolve unknown type: UNKNOWN_T"),
    ("CREATE STREAM S (A INT, A STRING) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON');",
     "Duplicate column names"),
    ("CREATE STREAM S (A INT) WITH (KAFKA_TOPIC='missing', VALUE_FORMAT='JSON');",
     "Topic 'missing' does not exist. If you want to create a new topic for the stream/table "
     "please re-run the statement providing the required 'PARTITIONS' configuration"),
    ("DROP STREAM NOPE;", "Stream NOPE does not exist."),
    ("DROP TABLE PV;", "Incompatible data source type is stream, but statement was DROP table"),
    ("TERMINATE CSAS_X_1;", "Unknown queryId: CSAS_X_1"),
    ("ALTER STREAM NOPE ADD COLUMN A INT;", "Source NOPE does not exist"),
    ("ALTER STREAM PV ADD COLUMN URL INT;", "A column with the same name already exists"),
    ("CREATE STREAM S AS SELECT * FROM USERS;",
     "Invalid result type. Your SELECT query produces a TABLE. Please use CREATE TABLE AS SELECT"),
    ("CREATE TABLE S AS SELECT * FROM PV;",
     "Invalid result type. Your SELECT query produces a STREAM."),
    ("CREATE STREAM S AS SELECT URL FROM PV;", "Key missing from projection"),
    ("CREATE STREAM S AS SELECT * FROM NOPE;", "NOPE does not exist."),
    ("CREATE STREAM S AS SELECT ID, NOPE FROM PV;", "SELECT column 'NOPE' cannot be resolved."),
    ("CREATE STREAM S AS SELECT ID FROM PV WHERE NOPE > 1;", "WHERE column 'NOPE' cannot be resolved."),
    ("CREATE STREAM S AS SELECT URL FROM PV;",
     "The query used to build `S` must include the key column ID in its projection"),
    ("DESCRIBE NOPE;", "Could not find STREAM/TABLE 'NOPE' in the Metastore"),
])
def test_rejections_use_ksqldb_wording(statement: str, message: str) -> None:
    assert message in fail(statement)


def test_drop_with_dependents_names_them() -> None:
    image = catalog(BASE + "CREATE STREAM DERIVED AS SELECT * FROM PV;")
    message = fail("DROP STREAM PV;", image)
    assert "The following streams and/or tables read from this source: [DERIVED]" in message


def test_statements_of_a_request_see_the_ones_before_them() -> None:
    validator = Validator(catalog(), Topics({"pv": 1, "users": 1, "t": 1}),
                          runtime_check=check_runtime)
    first, second = parse("CREATE STREAM S (A INT) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON');"
                          "CREATE STREAM S (A INT) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON');")
    assert isinstance(validator.validate(first), Write)
    with pytest.raises(errors.SourceExistsError):
        validator.validate(second)


def test_partitions_plans_the_topic_and_if_not_exists_skips() -> None:
    validator = Validator(catalog(), Topics({"pv": 1, "users": 1}), runtime_check=check_runtime)
    [create] = parse("CREATE STREAM S (A INT) WITH (KAFKA_TOPIC='new', VALUE_FORMAT='JSON', "
                     "PARTITIONS=4, REPLICAS=1);")
    outcome = validator.validate(create)
    assert isinstance(outcome, Write)
    assert outcome.topics_to_create == (TopicSpec("new", 4, 1, (("cleanup.policy", "delete"),)),)
    [again] = parse("CREATE STREAM IF NOT EXISTS PV (A INT) WITH (KAFKA_TOPIC='pv', "
                    "VALUE_FORMAT='JSON');")
    assert isinstance(validator.validate(again), Skip)
    [show] = parse("SHOW STREAMS;")
    assert isinstance(validator.validate(show), Read)


@pytest.mark.parametrize(("statement", "config"), [
    ("CREATE STREAM S (A INT) WITH (KAFKA_TOPIC='new', VALUE_FORMAT='JSON', PARTITIONS=1, "
     "RETENTION_MS=5000);", {"cleanup.policy": "delete", "retention.ms": "5000"}),
    ("CREATE TABLE T (K INT PRIMARY KEY, A INT) WITH (KAFKA_TOPIC='new', VALUE_FORMAT='JSON', "
     "PARTITIONS=1);", {"cleanup.policy": "compact"}),
    ("CREATE TABLE T (K INT PRIMARY KEY, A INT) WITH (KAFKA_TOPIC='new', VALUE_FORMAT='JSON', "
     "PARTITIONS=1, WINDOW_TYPE='TUMBLING', WINDOW_SIZE='1 SECOND');",
     {"cleanup.policy": "compact"}),
    ("CREATE STREAM S WITH (KAFKA_TOPIC='new') AS SELECT * FROM PV;",
     {"cleanup.policy": "delete"}),
    ("CREATE TABLE T WITH (KAFKA_TOPIC='new') AS SELECT URL, COUNT(*) FROM PV GROUP BY URL;",
     {"cleanup.policy": "compact"}),
    ("CREATE TABLE T WITH (KAFKA_TOPIC='new', RETENTION_MS=1000) AS SELECT URL, COUNT(*) FROM PV "
     "WINDOW TUMBLING (SIZE 1 SECOND, RETENTION 2 DAYS) GROUP BY URL;",
     {"cleanup.policy": "compact,delete", "retention.ms": str(2 * 24 * 3600 * 1000)}),
    ("CREATE TABLE T WITH (KAFKA_TOPIC='new') AS SELECT URL, COUNT(*) FROM PV "
     "WINDOW TUMBLING (SIZE 1 SECOND) GROUP BY URL;", {"cleanup.policy": "compact,delete"}),
])
def test_a_new_topic_is_configured_as_ksqldb_creates_it(statement: str,
                                                        config: dict[str, str]) -> None:
    """A table's topic is compacted (each key's newest row is what a reader rebuilds the table
    from); a stream's deletes old segments; a windowed table's does both."""
    validator = Validator(catalog(), Topics({"pv": 1, "users": 1}), runtime_check=check_runtime)
    [create] = parse(statement)
    outcome = validator.validate(create)
    assert isinstance(outcome, Write)
    [topic] = outcome.topics_to_create
    assert dict(topic.config) == config


def test_a_non_windowed_table_takes_no_retention() -> None:
    message = fail("CREATE TABLE T WITH (KAFKA_TOPIC='new', RETENTION_MS=1000) AS SELECT URL, "
                   "COUNT(*) FROM PV GROUP BY URL;")
    assert message.startswith("Invalid config variable in the WITH clause: RETENTION_MS.")


def test_derived_schemas() -> None:
    image = catalog(BASE + """
        CREATE STREAM UPPERED AS SELECT ID, UCASE(URL) AS U, N * 2 FROM PV WHERE N > 1;
        CREATE TABLE COUNTS AS SELECT URL, COUNT(*) AS C, SUM(N) AS TOTAL FROM PV GROUP BY URL;
        CREATE STREAM ENRICHED AS SELECT PV.ID, URL, NAME FROM PV JOIN USERS ON PV.ID = USERS.ID;
        CREATE STREAM REKEYED AS SELECT URL, ID FROM PV PARTITION BY URL;
    """)
    schemas = {name: image.sources[name].schema_text() for name in image.sources}
    assert schemas["UPPERED"] == "ID INTEGER KEY, U STRING, KSQL_COL_0 INTEGER"
    assert schemas["COUNTS"] == "URL STRING PRIMARY KEY, C BIGINT, TOTAL INTEGER"
    assert schemas["ENRICHED"] == "PV_ID INTEGER KEY, URL STRING, NAME STRING"
    assert schemas["REKEYED"] == "URL STRING KEY, ID INTEGER"
    assert {q.sink: q.sources for q in image.queries.values()}["ENRICHED"] == ("PV", "USERS")


def test_every_validated_command_applies() -> None:
    image = catalog()
    validator = Validator(image, Topics({"pv": 1, "users": 1, "t": 1}),
                          runtime_check=check_runtime)
    script = parse(
        "CREATE TYPE ADDR AS STRUCT<STREET STRING>;"
        "CREATE STREAM S (K INT KEY, A ADDR) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON');"
        "ALTER STREAM S ADD COLUMN B INT;"
        "CREATE STREAM D AS SELECT * FROM S; TERMINATE ALL; DROP STREAM D; DROP STREAM S;"
        "DROP TYPE ADDR;")
    delta = Delta(image)
    for offset, statement in enumerate(script, start=image.offset + 1):
        outcome = validator.validate(statement)
        assert isinstance(outcome, Write)
        delta.execute(outcome.command, offset)
    assert set(delta.apply().sources) == {"PV", "USERS"}
    assert EMPTY_IMAGE.fingerprint != image.fingerprint


def test_key_columns_come_first() -> None:
    image = catalog("CREATE STREAM P (TS BIGINT, USER_ID STRING KEY, PAGE STRING) "
                    "WITH (KAFKA_TOPIC='p', VALUE_FORMAT='JSON');")
    assert image.sources["P"].schema_text() == "USER_ID STRING KEY, TS BIGINT, PAGE STRING"


def test_a_topic_a_drop_of_the_same_transaction_deletes_cannot_be_used_again() -> None:
    """Kafka deletes the topic only after the commit: a source over it would stand over nothing."""
    message = fail("DROP STREAM PV DELETE TOPIC; CREATE STREAM PV2 (A INT) WITH "
                   "(KAFKA_TOPIC='pv', VALUE_FORMAT='JSON', PARTITIONS=1);")
    assert "Topic 'pv' is deleted by an earlier DROP ... DELETE TOPIC" in message
    later = Validator(catalog(), Topics({"pv": 1}), earlier_topics={"pv": None})
    with pytest.raises(errors.TopicDeletedError) as raised:
        later.validate(parse("CREATE STREAM PV2 (A INT) WITH (KAFKA_TOPIC='pv', "
                             "VALUE_FORMAT='JSON');")[0])
    assert raised.value.name == "pv", "the writer defers it when another request deletes pv"


@pytest.mark.parametrize(("with_clause", "message"), [
    ("WRAP_SINGLE_VALUE=5", "Failed to prepare statement: Invalid value 5 for property "
     "WRAP_SINGLE_VALUE: Expected value to be either true or false"),
    ("KAFKA_TOPIC=5", "Failed to prepare statement: Invalid value 5 for property KAFKA_TOPIC: "
     "Expected value to be a string, but it was a java.lang.Integer"),
    ("KAFKA_TOPIC=''", "Invalid value  for property KAFKA_TOPIC: String must be non-empty"),
    ("PARTITIONS='abc'", "Invalid value abc for property PARTITIONS: Not a number of type INT"),
    ("RETENTION_MS='x'", "Invalid value x for property RETENTION_MS: Not a number of type LONG"),
    ("TIMESTAMP_FORMAT='yyyy{'", "Invalid datetime format for config:TIMESTAMP_FORMAT, "
     "reason:Pattern includes reserved character: '{'"),
    ("SOURCE_CONNECTOR='x'", "Failed to prepare statement: Invalid config variable(s) in the "
     "WITH clause: SOURCE_CONNECTOR"),
    ("WINDOW_TYPE='TUMBLING'", "Invalid config variable(s) in the WITH clause: WINDOW_TYPE"),
    ("CLEANUP_POLICY='compact'", "Invalid config variable in the WITH clause: CLEANUP_POLICY.\n"
     "The CLEANUP_POLICY config is automatically inferred"),
    ("VALUE_PROTOBUF_NULLABLE_REPRESENTATION='OPTIONAL'",
     "Property VALUE_PROTOBUF_NULLABLE_REPRESENTATION can only be enabled with protobuf format"),
    ("VALUE_SCHEMA_FULL_NAME='x.y'", "JSON does not support the following configs: "
     "[fullSchemaName]"),
    ("KEY_FORMAT='JSON', KEY_SCHEMA_FULL_NAME='x.y'", "JSON does not support the following "
     "configs: [fullSchemaName]"),
    ("VALUE_AVRO_SCHEMA_FULL_NAME='a.b', VALUE_SCHEMA_FULL_NAME='x.y'",
     "Cannot supply both 'VALUE_AVRO_SCHEMA_FULL_NAME' and 'VALUE_SCHEMA_FULL_NAME' properties."),
    ("TIMESTAMP='NOPE'", "The TIMESTAMP column set in the WITH clause does not exist in the "
     "schema: 'NOPE'"),
])
def test_a_create_as_select_with_clause_follows_the_rules_of_a_create(
        with_clause: str, message: str) -> None:
    """CreateSourceAsProperties: the typed values and formats of CREATE's WITH clause, over the
    properties every CREATE shares."""
    assert message in fail(f"CREATE STREAM S WITH ({with_clause}) AS SELECT ID, URL FROM PV;")


def test_the_timestamp_column_is_checked_before_the_keys_a_sink_must_keep() -> None:
    assert "The TIMESTAMP column set in the WITH clause does not exist in the schema: " \
        "'INVALID_TS'" in fail("CREATE STREAM S WITH (TIMESTAMP='invalid_ts') AS SELECT URL, "
                               "N FROM PV;")


@pytest.mark.parametrize(("statement", "message"), [
    ("CREATE STREAM S WITH (KEY_FORMAT='DELIMITED') AS SELECT ID, URL FROM PV PARTITION BY NULL;",
     "Key format specified for stream without key columns."),
    ("CREATE STREAM S WITH (FORMAT='JSON') AS SELECT ID, URL FROM PV PARTITION BY NULL;",
     "Key format specified for stream without key columns."),
    ("CREATE STREAM S AS SELECT ID, URL FROM PV PARTITION BY NULL, ID;",
     "Cannot PARTITION BY multiple columns including NULL"),
    ("CREATE STREAM S AS SELECT URL FROM PV PARTITION BY ABS(ID);",
     "must include the partitioning expression ABS(PV.ID) in its projection "
     "(eg, SELECT ABS(PV.ID)...)."),
    ("CREATE STREAM S AS SELECT URL FROM PV P PARTITION BY ID, N;",
     "must include the partitioning expressions P.ID and P.N in its projection"),
])
def test_partition_by_rules(statement: str, message: str) -> None:
    assert message in fail(statement)


def test_partition_by_null_leaves_the_sink_without_a_key_format() -> None:
    results, image = run_script(BASE + "CREATE STREAM S WITH (KEY_FORMAT='NONE') AS SELECT ID, "
                                "URL FROM PV PARTITION BY NULL; CREATE STREAM S2 AS SELECT ID, "
                                "URL FROM PV PARTITION BY NULL;")
    assert all(r.ok for r in results), [r.message for r in results if not r.ok]
    assert image.sources["S"].key_format == image.sources["S2"].key_format == "NONE"
    assert not image.sources["S2"].key_columns


@pytest.mark.parametrize(("script", "message"), [
    ("CREATE TYPE T AS DECIMAL(3,4);", "DECIMAL precision must be >= scale: DECIMAL(3,4)"),
    ("CREATE STREAM S (A DECIMAL(0,0)) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON');",
     "DECIMAL precision must be >= 1: DECIMAL(0,0)"),
    ("ALTER STREAM PV ADD COLUMN D DECIMAL(2, 3);", "DECIMAL precision must be >= scale"),
    ("CREATE STREAM S AS SELECT ID, CAST(N AS DECIMAL(2,5)) AS D FROM PV;",
     "DECIMAL precision must be >= scale: DECIMAL(2,5)"),
    ("CREATE TYPE T AS STRUCT<X INT, X STRING>;",
     "Duplicate field names found in STRUCT: '`X` INTEGER' and '`X` STRING'"),
    ("CREATE STREAM S (A STRUCT<x INT, `X` INT>) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON');",
     "Duplicate field names found in STRUCT: '`X` INTEGER' and '`X` INTEGER'"),
    ("CREATE STREAM S AS SELECT ID, CAST(N AS STRUCT<A INT, A INT>) AS D FROM PV;",
     "Duplicate field names found in STRUCT"),
])
def test_types_ksqldb_cannot_build_fail_the_statement_as_it_is_prepared(
        script: str, message: str) -> None:
    results, _ = run_script(BASE + script, runtime_check=False)
    [failed] = [r for r in results if not r.ok]
    assert failed.message is not None
    assert failed.message.startswith("Failed to prepare statement: ")
    assert message in failed.message


def test_case_distinct_struct_fields_and_valid_decimals_are_types() -> None:
    results, _ = run_script(BASE + "CREATE STREAM S (A STRUCT<x INT, `x` INT>, B DECIMAL(38, 38), "
                            "C DECIMAL(5, 0)) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON', "
                            "PARTITIONS=1);", runtime_check=False)
    assert all(r.ok for r in results), [r.message for r in results if not r.ok]


def test_a_create_as_select_registers_only_sink_schemas_avro_can_name() -> None:
    results, _ = run_script(
        "CREATE STREAM INPUT (V DOUBLE) WITH (KAFKA_TOPIC='input', VALUE_FORMAT='AVRO', "
        "PARTITIONS=1); CREATE STREAM OUTPUT AS SELECT V AS `1Avro` FROM INPUT;",
        runtime_check=False)
    assert results[-1].message == ("Could not register schema for topic: Schema is not "
                                   "compatible with Avro: Illegal initial character: 1Avro")


def test_insert_into_a_stream_from_a_table_query_names_both_kinds() -> None:
    message = fail("CREATE STREAM S AS SELECT ID, URL FROM PV; "
                   "INSERT INTO S SELECT ID, COUNT(*) AS C FROM PV GROUP BY ID;")
    assert message == ("Incompatible data sink and query result. Data sink (S) type is KSTREAM "
                       "but select query result is KTABLE.")


@pytest.mark.parametrize(("with_clause", "message"), [
    ("FOO='x'", "Failed to prepare statement: Invalid config variable(s) in the WITH clause: FOO"),
    ("QUERY_ID='my_q'", "INSERT INTO ... WITH (QUERY_ID=...) is not supported"),
])
def test_insert_into_with_clause_is_never_ignored(with_clause: str, message: str) -> None:
    image = catalog(BASE + "CREATE STREAM S WITH (KAFKA_TOPIC='t') AS SELECT ID, URL FROM PV;")
    assert message in fail(f"INSERT INTO S WITH ({with_clause}) SELECT ID, URL FROM PV;", image)


def test_insert_into_casts_numeric_literals_that_fit_a_decimal_sink_column() -> None:
    base = ("CREATE STREAM SRC (V STRING) WITH (KAFKA_TOPIC='src', VALUE_FORMAT='JSON', "
            "PARTITIONS=1); CREATE STREAM TARGET (C1 DECIMAL(5,2), C2 DECIMAL(5,2)) WITH "
            "(KAFKA_TOPIC='target', VALUE_FORMAT='JSON', PARTITIONS=1);")
    results, _ = run_script(base + "INSERT INTO TARGET SELECT 1 AS C1, 2.0 AS C2 FROM SRC;",
                                runtime_check=False)
    assert all(r.ok for r in results), [r.message for r in results if not r.ok]
    # a literal with more integer digits, or a larger scale, than the column's is not cast
    for selected in ("1234 AS C1, 2.0 AS C2", "1 AS C1, 2.005 AS C2"):
        results, _ = run_script(base + f"INSERT INTO TARGET SELECT {selected} FROM SRC;",
                                runtime_check=False)
        assert "Incompatible schema between results and sink." in (results[-1].message or "")


@pytest.mark.parametrize(("text", "precision", "scale"), [
    ("1", 1, 0), ("2.0", 2, 1), ("0.005", 4, 3), ("0", 1, 0), ("123.45", 5, 2), ("1E+3", 4, 0),
])
def test_a_numeric_literal_is_the_decimal_ksqldb_makes_of_its_value(
        text: str, precision: int, scale: int) -> None:
    assert operators.decimal_of_value(Decimal(text)) == ty.DecimalType(precision, scale)
