"""The projection's objects created as copies of templates (beneath SQL), on a real Spark:
each view's declared schema is what Spark's analysis of its query makes of it, on every column
type, key format and window; the copies carry their own options, properties and text; a
reconcile creates, drops and creates again."""

from __future__ import annotations

from typing import Any

from metastore.spark.catalog_clones import TEMPLATE_TABLE, TEMPLATE_VIEW
from metastore.spark.projection import SparkProjection
from metastore.spark.views import SPEC_PROPERTY
from metastore.testing.check import run_script

DATABASE = "clones"
KAFKA = {"kafka.bootstrap.servers": "127.0.0.1:9"}  # created and analyzed, never read
SCRIPT = """
CREATE STREAM EVERY_TYPE (K STRING KEY, B BOOLEAN, I INT, L BIGINT, D DOUBLE, DE DECIMAL(10, 3),
  S STRING, BY BYTES, DT DATE, TM TIME, TS TIMESTAMP,
  AR ARRAY<STRUCT<X INT, Y ARRAY<STRING>>>, M MAP<STRING, DOUBLE>,
  ST STRUCT<A INT, `b c` MAP<STRING, ARRAY<INT>>>, H BYTES HEADER('h'))
  WITH (KAFKA_TOPIC='every', VALUE_FORMAT='JSON', PARTITIONS=1);
CREATE TABLE DELIMITED_TABLE (ID INT PRIMARY KEY, V STRING, N DOUBLE)
  WITH (KAFKA_TOPIC='delimited', VALUE_FORMAT='DELIMITED', PARTITIONS=1);
CREATE STREAM KAFKA_VALUES (K BIGINT KEY, V DOUBLE)
  WITH (KAFKA_TOPIC='kafka', KEY_FORMAT='KAFKA', VALUE_FORMAT='KAFKA', PARTITIONS=1);
CREATE TABLE TUMBLING_COUNTS (K STRING PRIMARY KEY, C BIGINT) WITH (KAFKA_TOPIC='tumbling',
  VALUE_FORMAT='JSON', WINDOW_TYPE='TUMBLING', WINDOW_SIZE='1 MINUTE', PARTITIONS=1);
CREATE STREAM SESSIONS (K INT KEY, V STRING) WITH (KAFKA_TOPIC='sessions', VALUE_FORMAT='JSON',
  WINDOW_TYPE='SESSION', PARTITIONS=1);
CREATE STREAM PROTO (K STRING KEY, A INT, B ARRAY<STRING>, C STRUCT<X DOUBLE>)
  WITH (KAFKA_TOPIC='proto', KEY_FORMAT='KAFKA', VALUE_FORMAT='PROTOBUF_NOSR', PARTITIONS=1);
CREATE STREAM `MixedCase` (`Id` INT KEY, `v` STRING)
  WITH (KAFKA_TOPIC='mixed', VALUE_FORMAT='JSON', PARTITIONS=1);
CREATE STREAM NO_VALUE_COLUMNS (K STRING KEY) WITH (KAFKA_TOPIC='keys', FORMAT='JSON',
  PARTITIONS=1);
"""


def _image(script: str = SCRIPT) -> Any:
    results, image = run_script(script)
    assert all(r.ok for r in results), [r for r in results if not r.ok]
    return image


def _types(schema: Any) -> list[tuple[str, str]]:
    """Names and types, nullability aside (a copy declares every column nullable)."""
    return [(f.name, f.dataType.simpleString()) for f in schema.fields]


def test_each_view_declares_the_schema_spark_analyzes_from_its_query(spark: Any) -> None:
    projection = SparkProjection(spark, DATABASE, KAFKA)
    image = _image()
    result = projection.reconcile(image)
    wanted = projection.desired(image)
    assert result.created == len(wanted) == 2 * len(image.sources)
    views = [obj for obj in wanted.values() if obj.is_view]
    assert len(views) == len(image.sources)
    for view in views:
        declared = spark.table(f"`{DATABASE}`.`{view.name}`").schema
        analyzed = spark.sql(view.text).schema
        assert _types(declared) == _types(analyzed), view.name
    windowed = spark.table(f"{DATABASE}.tumbling_counts").schema
    assert [f.name for f in windowed.fields] == ["K", "WINDOWSTART", "WINDOWEND", "C"]


def test_copies_carry_their_own_definition_and_no_template_is_left(spark: Any) -> None:
    projection = SparkProjection(spark, DATABASE + "_own", KAFKA)
    image = _image()
    projection.reconcile(image)
    wanted = projection.desired(image)
    present = projection.actual()
    assert sorted(present) == sorted(wanted)
    assert {name: obj.spec for name, obj in present.items()} == {
        name: obj.spec for name, obj in wanted.items()}
    assert TEMPLATE_TABLE not in present and TEMPLATE_VIEW not in present
    database = DATABASE + "_own"
    raw = spark.sql(f"DESCRIBE TABLE EXTENDED {database}._kafka_delimited_table").collect()
    details = {row["col_name"]: row["data_type"] for row in raw}
    assert "subscribe=delimited" in details["Storage Properties"]
    assert details["Type"] == "MANAGED"
    assert details["Location"].endswith(f"/{database}.db/_kafka_delimited_table")
    properties = {row["key"]: row["value"] for row in
                  spark.sql(f"SHOW TBLPROPERTIES {database}.delimited_table").collect()}
    assert properties[SPEC_PROPERTY] == wanted["delimited_table"].spec
    assert properties["metastore.topic"] == "delimited"
    view = spark.sql(f"DESCRIBE TABLE EXTENDED {database}.delimited_table").collect()
    text = {row["col_name"]: row["data_type"] for row in view}["View Text"]
    assert text == wanted["delimited_table"].text


def test_a_reconcile_drops_and_creates_again_by_copies(spark: Any) -> None:
    projection = SparkProjection(spark, DATABASE + "_again", KAFKA)
    full = _image()
    projection.reconcile(full)
    fewer = _image(SCRIPT.split("CREATE TABLE TUMBLING_COUNTS", maxsplit=1)[0])
    less = projection.reconcile(fewer)
    assert less.dropped == 2 * (len(full.sources) - len(fewer.sources)) and less.created == 0
    assert sorted(projection.actual()) == sorted(projection.desired(fewer))
    more = projection.reconcile(full)
    assert more.created == less.dropped and more.dropped == 0
    assert sorted(projection.actual()) == sorted(projection.desired(full))
    # a new projection of the same catalog reads it back equal: nothing to do
    assert SparkProjection(spark, DATABASE + "_again", KAFKA).reconcile(full).created == 0
