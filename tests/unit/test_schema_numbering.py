"""The schema ids ksqlDB's test driver gives a test's schemas: Java's String.hashCode and
HashMap order, and the sides CREATE statements derive schemas for."""

from __future__ import annotations

from metastore.engine.overrides import resolve
from metastore.sql.parser import parse
from metastore.testing.schema_numbering import (
    SchemaSide,
    _string_hash,
    java_hash_map_order,
    registration_order,
    statement_sides,
)


def test_string_hash_is_javas() -> None:
    assert _string_hash("") == 0
    assert _string_hash("hello") == 99162322  # "hello".hashCode()
    assert _string_hash("é") == 233
    assert _string_hash("\U0001F600") == (31 * 0xD83D + 0xDE00)  # two UTF-16 code units
    assert _string_hash("polygenelubricants") == 0x80000000  # Integer.MIN_VALUE, as unsigned


def test_hash_map_order_is_javas() -> None:
    """Orders printed by Java 17's ``new HashMap<>()`` after the same puts (its keySet)."""
    assert java_hash_map_order(["OUTPUT", "input"]) == ["input", "OUTPUT"]
    assert java_hash_map_order(["input", "OUTPUT", "input"]) == ["input", "OUTPUT"]
    assert java_hash_map_order(["BB", "Aa"]) == ["BB", "Aa"]  # one hash: insertion order
    names = [f"t{index}" for index in range(13)]
    assert java_hash_map_order(names[:12]) == [
        "t4", "t5", "t6", "t10", "t7", "t8", "t9", "t11", "t0", "t1", "t2", "t3"]
    assert java_hash_map_order(names) == [  # the 13th put grew the table to 32 buckets
        "t4", "t5", "t6", "t7", "t8", "t9", "t10", "t12", "t11", "t0", "t1", "t2", "t3"]
    assert java_hash_map_order(
        ["left_topic", "right_topic", "OUTPUT", "input_topic", "s1", "s2", "S3"]) == [
        "S3", "right_topic", "OUTPUT", "input_topic", "left_topic", "s1", "s2"]


def test_create_statements_derive_schemas_for_their_registry_sides() -> None:
    statements = parse(
        "CREATE STREAM A (ID INT KEY, V INT) WITH (KAFKA_TOPIC='a', FORMAT='AVRO');"
        "CREATE STREAM B (V INT) WITH (KAFKA_TOPIC='b', VALUE_FORMAT='PROTOBUF');"
        "CREATE STREAM C WITH (KAFKA_TOPIC='c', VALUE_FORMAT='AVRO');"  # inferred, not derived
        "CREATE STREAM D (ID INT KEY, V INT) WITH (KAFKA_TOPIC='d', VALUE_FORMAT='JSON');"
        "CREATE STREAM E WITH (KAFKA_TOPIC='e', VALUE_FORMAT='AVRO') AS SELECT * FROM A;")
    sides = statement_sides(statements, resolve({}))
    assert sides == [SchemaSide("a", True), SchemaSide("a", False), SchemaSide("b", False)]
    assert registration_order(["b", "a", "zz"], sides) == [
        SchemaSide(name, is_key) for name, is_key in
        [(n, k) for n in java_hash_map_order(["b", "a", "zz"]) for k in (True, False)]
        if SchemaSide(name, is_key) in sides]
