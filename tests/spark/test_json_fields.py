"""ksqlDB's JSON field rule as Spark decodes it (metastore.spark.views), on a real Spark: a
column reads the field of its exact name, else the last field whose upper-cased name is its
name, including names that differ only in case; and the project's ``json_fields``, which finds
those fields in one pass, gives each field's text as Spark's own ``from_json`` does."""

from __future__ import annotations

import json
from typing import Any

from metastore.jvm.classes import JSON_FIELDS_FUNCTION
from metastore.spark.types import string_literal
from metastore.spark.views import decode_select
from metastore.testing.check import run_script

TEXTS = [
    '{"A": 1, "B": "b", "c": 10}',
    '{"a": 2, "b": "lower", "C": 20}',
    '{"A": 3, "a": 4, "B": "exact wins"}',
    '{"a": 5, "a": 6, "B": "last lower wins"}',
    '{"A": null, "a": 7, "B": "null exact wins"}',
    '{"B": "missing A"}',
    '{"A": 8, "B": [1, 2], "c": 30, "skipped": {"k": [1]}}',
    '{"A": 9, "A": 10, "B": "x", "c": 1}',
    '[{"A": 11, "B": "array"}]',
    "nonsense",
    '"text"',
    "{}",
    '{"A": 12, "B": "u\\u00e9", "c": 40, "extra": true}',
    '{"a": 13, "B": "first occurrence", "A2": 0, "a": 14}',
]
SOURCE = ("CREATE STREAM S (A INT, B STRING, `c` BIGINT) "
          "WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON', PARTITIONS=1);")
SAME_BUT_CASE = ("CREATE STREAM S (`x` STRING, X STRING) "
                 "WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON', PARTITIONS=1);")


def _field(text: str, name: str) -> Any:
    """The rule, in Python, as ksqlDB's deserializer applies it over Jackson's ObjectNode: the
    object keeps each name where it first came, with its last value (as a dict does); the exact
    name, else the upper-cased copy of the object, whose last entry of a name wins."""
    try:
        pairs = json.loads(text, object_pairs_hook=list)
    except ValueError:
        return None
    if not isinstance(pairs, list) or (pairs and not isinstance(pairs[0], tuple)):
        return None
    fields = dict(pairs)
    if name in fields:
        return fields[name]
    upper = {key.upper(): value for key, value in fields.items()}
    return upper.get(name)


def _decoded(spark: Any, script: str, texts: list[str]) -> list[tuple[Any, ...]]:
    results, image = run_script(script)
    assert all(r.ok for r in results)
    [source] = image.sources.values()
    rows = ", ".join(f"({index}, {string_literal(text)})" for index, text in enumerate(texts))
    raw = (f"(SELECT CAST(NULL AS BINARY) AS key, CAST(t AS BINARY) AS value FROM "
           f"(SELECT * FROM VALUES {rows} AS v(i, t) ORDER BY i))")
    return [tuple(row) for row in spark.sql(decode_select(source, raw)).collect()]


def _is_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def test_each_column_reads_ksqldbs_field(spark: Any) -> None:
    """A record that is not a JSON object is skipped, as ksqlDB's deserializer refuses it."""
    decoded = _decoded(spark, SOURCE, TEXTS)
    expected = []
    for text in filter(_is_object, TEXTS):
        a, b, c = _field(text, "A"), _field(text, "B"), _field(text, "c")
        expected.append((a, b if b is None or isinstance(b, str) else json.dumps(b, separators=(",", ":")),
                         c))
    assert decoded == expected


def test_names_that_differ_only_in_case_read_their_own_fields(spark: Any) -> None:
    texts = ['{"x": "lower", "X": "upper"}', '{"X": "upper only"}', '{"x": "lower only"}']
    assert _decoded(spark, SAME_BUT_CASE, texts) == [
        ("lower", "upper"), (None, "upper only"), ("lower only", "lower only")]


def test_of_names_that_differ_in_case_the_one_first_seen_last_is_read_with_its_last_value(
        spark: Any) -> None:
    """ksqlDB's object keeps a repeated name where it first came: of ``ab`` and ``Ab``, the
    column ``AB`` reads the one whose first occurrence is last, with that name's last value."""
    script = ("CREATE STREAM S (AB INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON', "
              "PARTITIONS=1);")
    texts = ['{"ab": 1, "Ab": 2, "ab": 3}', '{"Ab": 1, "ab": 2, "Ab": 3}', '{"ab": 1, "Ab": 2}',
             '{"aB": 1, "ab": 2, "Ab": 3, "ab": 4, "aB": 5}', '{"ab": 1, "AB": 2, "Ab": 3}']
    assert _decoded(spark, script, texts) == [(2,), (2,), (2,), (3,), (2,)]
    assert [_field(text, "AB") for text in texts] == [2, 2, 2, 3, 2]


FIELD_TEXTS = [
    '{"n": 1, "f": 1.10, "e": 1e2, "g": 1E+2, "z": -0, "big": 12345678901234567890}',
    '{"f": 12345678901234567890.123456789, "e": 0.1e-400, "n": -0.0, "big": 1.5e308}',
    '{"s": "t\\u00e9xt \\"quoted\\" \\n", "b": true, "c": false, "null": null}',
    '{"o": {"x" : 1 , "y": [1, 2.50, "s", null, {"z": true}]}, "a": [ ]}',
    '{"n": NaN, "f": Infinity, "e": -Infinity}',
    "{'s': 'single quotes', 'n': 3}",
    '{"s": "", "o": {}, "a": [[1], [2.0]]}',
    '{"n": "1", "b": "true", "null": "null", "o": "{}", "s": 7}',
]
FIELD_NAMES = ["n", "f", "e", "g", "z", "big", "s", "b", "c", "null", "o", "a"]
"""Names no other field's upper-cased name matches: each column reads the field of its name."""


def test_json_fields_gives_each_field_the_text_spark_from_json_gives(spark: Any) -> None:
    """Numbers as Spark's JSON reader prints them (a float through a double), nested values as
    compact JSON, strings by their content, JSON null as NULL, and the options Spark reads JSON
    with (single quotes, NaN): the texts ksqlDB's rules in the SQL were written against."""
    names = string_literal(json.dumps(FIELD_NAMES))
    rows = ", ".join(f"({index}, {string_literal(text)})" for index, text in enumerate(FIELD_TEXTS))
    read = spark.sql(
        f"SELECT i, {JSON_FIELDS_FUNCTION}(t, {names}) AS ours, "
        "from_json(t, 'MAP<STRING,STRING>') "
        f"AS spark FROM VALUES {rows} AS v(i, t) ORDER BY i").collect()
    for row in read:
        ours, theirs = row["ours"], row["spark"]
        assert ours[-1] is None
        assert ours[0::2][:-1] == [theirs.get(name) for name in FIELD_NAMES]
        kinds = [kind == "s" for kind in ours[1::2]]
        strings = {key for key, value in json.loads(FIELD_TEXTS[row["i"]].replace("'", '"'),
                                                     parse_constant=float).items()
                   if isinstance(value, str)}
        assert kinds == [name in strings for name in FIELD_NAMES]


def test_json_fields_refuses_what_is_no_json_object(spark: Any) -> None:
    """A text that is not a JSON object (or is cut off, or is no UTF-8) is refused: the last
    element says so and no field is read; JSON null (with any white space, or what follows it,
    as ksqlDB's parser reads one value) and no text at all are readable, with every field NULL;
    a byte-order mark or UTF-16 is read, as ksqlDB's parser detects the encoding."""
    refused = ["nonsense", '[{"n": 1}]', '"text"', "12", "", '{"n": 1', '{"n": 1,}']
    nulls = ["null", " null ", "null\n", "\tnull", "null junk"]
    texts = [string_literal(text) for text in [*refused, *nulls]]
    texts += ["NULL", "CAST(X'7b226e223a2022ff227d' AS STRING)"]  # {"n": "\xff"}
    texts += [f"CAST(X'{text.encode(encoding).hex()}' AS STRING)"
              for text, encoding in [('{"n": 2}', "utf-8-sig"), ('{"n": 3}', "utf-16")]]
    rows = ", ".join(f"({index}, {text})" for index, text in enumerate(texts))
    read = [row[0] for row in spark.sql(
        f"SELECT {JSON_FIELDS_FUNCTION}(t, '[\"n\"]') FROM VALUES {rows} AS v(i, t) "
        "ORDER BY i").collect()]
    assert read == ([[None, None, "refused"]] * len(refused) + [[None, None, None]] * 6
                    + [[None, None, "refused"], ["2", None, None], ["3", None, None]])
