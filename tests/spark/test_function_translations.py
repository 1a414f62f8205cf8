"""ksqlDB functions translated by metastore.functions and evaluated by Spark (batch), against
ksqlDB's documented results (and those of its query tests)."""

from __future__ import annotations

import decimal
import math
from typing import Any

import pytest
from sqlglot import exp

from metastore.engine.analysis import analyse
from metastore.functions import library as functions
from metastore.functions.sparksql import spark_type
from metastore.sql.parser import parse
from metastore.sql.statements import CreateAsSelect
from metastore.testing.check import run_script

SOURCE = ("CREATE STREAM S (ID INT KEY, S STRING, N INT, B BIGINT, D DOUBLE, DE DECIMAL(4, 2), "
          "A ARRAY<INT>, M MAP<STRING, INT>, ROWOFFSET_ BIGINT) "
          "WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');")
ROW: dict[str, Any] = {"ID": 1, "S": "some_string", "N": 7, "B": -7, "D": -1.5, "DE": decimal.Decimal("1.25"),
                       "A": [3, 6, None], "M": {"a": 1, "b": 2}, "ROWOFFSET_": 0}


@pytest.fixture
def spark(spark: Any) -> Any:
    """The shared session, with ksqlDB's non-ANSI arithmetic and casts."""
    spark.conf.set("spark.sql.ansi.enabled", "false")
    return spark


def _translated(select_list: str, grouped: bool = False) -> tuple[list[str], list[str]]:
    results, image = run_script(SOURCE)
    assert all(r.ok for r in results)
    kind, grouping = ("TABLE", " GROUP BY ID") if grouped else ("STREAM", "")
    [statement] = parse(f"CREATE {kind} X AS SELECT ID, {select_list} FROM S{grouping};")
    assert isinstance(statement, CreateAsSelect)
    analysis = analyse(statement.query, image.sources, image.types, "X")
    names = [name for name, _ in analysis.projection][1:]
    context = functions.SparkContext(row_offset=exp.column("ROWOFFSET_"))
    sql = [functions.to_spark(e.copy(), context).sql(dialect="spark", identify=True)
           for _, e in analysis.projection[1:]]
    return names, sql


def evaluate(spark: Any, select_list: str, rows: list[dict[str, Any]] | None = None) -> list[Any]:
    names, sql = _translated(select_list)
    _results, image = run_script(SOURCE)
    source = image.sources["S"]
    schema = ", ".join(f"`{c.name}` {spark_type(c.type)}" for c in source.columns)
    spark.createDataFrame(rows or [ROW], schema).createOrReplaceTempView("S")
    frame = spark.sql(f"SELECT {', '.join(f'{s} AS `{n}`' for s, n in zip(sql, names, strict=True))} "
                      "FROM S")
    return [list(r) for r in frame.collect()]


SCALARS: list[tuple[str, Any]] = [
    ("UCASE(S)", "SOME_STRING"), ("LCASE('AbC')", "abc"), ("LEN(S)", 11),
    ("SUBSTRING(S, 6)", "string"), ("SUBSTRING(S, 6, 3)", "str"), ("SUBSTRING(S, 0, 2)", "so"),
    ("SUBSTRING(S, -6)", "string"), ("SUBSTRING('abc', -5, 3)", "abc"),
    ("SUBSTRING(S, 20)", ""), ("SUBSTRING(S, CAST(NULL AS INT))", None),
    ("TRIM(CONCAT(' \t', S, ' \t'))", "some_string"),
    ("CONCAT('a', NULL, 'b')", "ab"), ("CONCAT_WS('-', 'a', NULL, 'b')", "a-b"),
    ("LPAD('ab', 5, 'xy')", "xyxab"), ("LPAD('ab', 5, '')", None), ("RPAD('ab', 3, 'x')", "abx"),
    ("INSTR('corporate floor', 'or')", 2), ("INSTR('corporate floor', 'or', 3)", 5),
    ("INSTR(CAST(NULL AS STRING), 'or')", 0),
    ("MASK('AbC-12')", "XxX-nn"), ("MASK_LEFT('AbCd', 2)", "XxCd"),
    ("MASK_KEEP_RIGHT('AbCd', 1)", "XxXd"),
    ("REGEXP_EXTRACT('[0-9]+', 'ab12cd')", "12"), ("REGEXP_EXTRACT('x', 'ab')", None),
    ("SPLIT('a.b.c', '.')", ["a", "b", "c"]), ("SPLIT('..a', '.')", ["", "", "a"]),
    ("INITCAP('hello wORLD')", "Hello World"), ("CHR(75)", "K"), ("CHR('\\u004b')", "K"),
    ("CHR('75')", None), ("ELT(2, 'a', 'b')", "b"), ("FIELD('b', 'a', 'b')", 2),
    ("TO_JSON_STRING(N)", "7"), ("TO_JSON_STRING(CAST(NULL AS INT))", "null"),
    ("TO_JSON_STRING(M)", '{"a":1,"b":2}'), ("TO_JSON_STRING(S)", '"some_string"'),
    ("EXTRACTJSONFIELD('{\"a\": {\"b\": 1}}', '$.a.b')", "1"),
    ("IS_JSON_STRING('[1, 2]')", True), ("IS_JSON_STRING('abc')", False),
    ("ROUND(D)", -1), ("ROUND(2.5E0)", 3), ("ROUND(N)", 7), ("ROUND(1.005E0, 2)", 1.01),
    ("ROUND(-1.25E0, 1)", -1.2), ("ROUND(DE, 1)", 1.3), ("TRUNC(-1.7E0)", -1),
    ("CEIL(D)", -1.0), ("FLOOR(D)", -2.0), ("ABS(B)", 7), ("SIGN(D)", -1),
    ("GEO_DISTANCE(37.4439, -122.1663, 51.5257, -0.1122)", 8634.659796579546),  # Palo Alto to London
    ("GEO_DISTANCE(37.4439, -122.1663, 51.5257, -0.1122, ' Miles ')", 5365.659729188264),
    ("GEO_DISTANCE(91, 0, 0, 0)", None), ("GEO_DISTANCE(0, 0, 0, 0, 'parsecs')", None),
    ("GEO_DISTANCE(0, 0, 0, 0, '')", 0.0),
    ("TIMESTAMPTOSTRING(1526075913000, 'yyyy-MM-dd HH:mm:ss zzz', 'America/Los_Angeles')",
     "2018-05-11 14:58:33 PDT"),  # the zone's name and wall time, as Java formats them
    ("TIMESTAMPTOSTRING(1526075913000, 'HH:mmX', 'Asia/Kolkata')", "03:28+0530"),
    ("TIMESTAMPTOSTRING(0, '''null''', 'UTC')", "null"),
    ("TIMESTAMPTOSTRING(0, 'yyyy', 'Not/AZone')", None),
    ("FORMAT_TIMESTAMP(FROM_UNIXTIME(1526075913000), 'HH:mm z', 'Europe/London')", "22:58 BST"),
    ("LN(0)", -math.inf), ("N / 2", 3), ("B / 2", -3), ("D / 2", -0.75),
    ("GREATEST(N, 2, NULL, 3)", 7), ("LEAST(N, 3)", 3),
    ("GENERATE_SERIES(4, 1)", [4, 3, 2, 1]),
    ("A[1]", 3), ("A[-1]", None), ("A[-2]", 6), ("A[0]", None), ("A[9]", None),
    ("M['b']", 2), ("ARRAY_LENGTH(A)", 3), ("ARRAY_MAX(A)", 6),
    ("ARRAY_CONTAINS(A, 6)", True), ("ARRAY_JOIN(A, '|')", "3|6|null"),
    ("SLICE(A, 1, 2)", [3, 6]), ("ARRAY_CONCAT(A, NULL)", [3, 6, None]),
    ("TRANSFORM(ARRAY[1, 2], x => x + 5)", [6, 7]), ("FILTER(A, x => x > 3)", [6]),
    ("REDUCE(ARRAY[3, 6], 2, (acc, x) => acc + x)", 11),
    ("REDUCE(CAST(NULL AS ARRAY<INT>), 2, (acc, x) => acc + x)", 2),
    ("TRANSFORM(M, (k, v) => UCASE(k), (k, v) => v * 10)", {"A": 10, "B": 20}),
    ("FILTER(M, (k, v) => v > 1)", {"b": 2}),
    ("REDUCE(M, 0, (acc, k, v) => acc + v)", 3),
    ("MAP_KEYS(M)", ["a", "b"]), ("MAP_UNION(M, MAP('b' := 5))", {"a": 1, "b": 5}),
    ("COALESCE(NULL, N)", 7), ("IFNULL(CAST(NULL AS INT), 2)", 2), ("NULLIF(N, 7)", None),
    ("AS_VALUE(N)", 7),
    ("FORMAT_TIMESTAMP(FROM_UNIXTIME(1526075913000), 'yyyy-MM-dd HH:mm:ss')",
     "2018-05-11 21:58:33"),
    ("TIMESTAMPTOSTRING(1526075913000, 'HH:mm', 'America/Los_Angeles')", "14:58"),
    ("DATETOSTRING(17662, 'yyyy-MM-dd')", "2018-05-11"),
    ("STRINGTOTIMESTAMP('2018-05-11 21:58:33', 'yyyy-MM-dd HH:mm:ss')", 1526075913000),
    ("UNIX_TIMESTAMP(TIMESTAMPADD(SECONDS, 5, FROM_UNIXTIME(1000)))", 6000),
    ("TIMEADD(HOURS, 25, PARSE_TIME('23:00', 'HH:mm'))", 0),
    ("URL_EXTRACT_HOST('http://a.b.com:8080/p?q=1#f')", "a.b.com"),
    ("URL_EXTRACT_PORT('http://a.b.com:8080/p?q=1#f')", 8080),
    ("URL_EXTRACT_PARAMETER('http://a.b.com/p?q=a%20b', 'q')", "a b"),
    ("URL_EXTRACT_FRAGMENT('http://a.b.com/p?q=1#f')", "f"),
    ("ARRAY_REMOVE(A, CAST(NULL AS INT))", [3, 6]), ("ARRAY_REMOVE(A, 6)", [3, None]),
    ("ARRAY_JOIN(A, CAST(NULL AS STRING))", "36null"),
    ("ARRAY_DISTINCT(ARRAY[M, MAP('b' := 2, 'a' := 1), NULL, NULL])", [{"a": 1, "b": 2}, None]),
    ("TRANSFORM(A, x => x + 1)", None), ("TRANSFORM(A, x => IFNULL(x, 0) + 1)", [4, 7, 1]),
    ("TRANSFORM(A, x => CASE WHEN x IS NULL THEN 0 ELSE x * 2 END)", [6, 12, 0]),
    ("FILTER(A, x => x * 2 > 7)", None),
    # a lambda that throws on an element ends the whole call in its exception: NULL
    ("TRANSFORM(A, x => 6 / (IFNULL(x, 0) - 3))", None),
    ("TRANSFORM(A, x => 6 / (IFNULL(x, 1) - 0))", [2, 1, 6]),
    ("FILTER(A, x => 12 / IFNULL(x, 0) > 1)", None),
    ("TRANSFORM(M, (k, v) => 2 / (v - 1), (k, v) => v)", None),
    ("FILTER(M, (k, v) => 2 / (v - 2) < 0)", None), ("FILTER(M, (k, v) => 2 / v > 1)", {"a": 1}),
    ("TRANSFORM(A, x => CASE WHEN x IS NULL THEN 0 ELSE 6 / (x - 6) END)", None),
    ("TRANSFORM(A, x => CASE WHEN x = 6 THEN 0 ELSE 6 / IFNULL(x, 1) END)", [2, 0, 6]),
    # a lambda's call inside another's body: its variables are its own, the failure the outer's
    ("TRANSFORM(A, x => TRANSFORM(ARRAY[0, 1], y => y / IFNULL(x, 1)))", [[0, 0], [0, 0], [0, 1]]),
    ("TRANSFORM(A, x => TRANSFORM(ARRAY[1], y => y / (IFNULL(x, 0) - 3)))", None),
    ("TRANSFORM(M, (k, v) => k, (k, v) => REDUCE(MAP('z' := 1), 0, (acc, j, w) => acc + w + v))",
     {"a": 2, "b": 3}),
    ("TRANSFORM(M, (k, v) => k, (k, v) => 2 / v)", {"a": 2, "b": 1}),
    ("ARRAY_LENGTH(TRANSFORM(A, x => 6 / (IFNULL(x, 0) - 6)))", None),
    # ... but a node inside the lambda that catches it is only that element's NULL
    ("TRANSFORM(A, x => CAST(CAST(6 / (IFNULL(x, 0) - 3) AS STRING) AS INT))", [None, 2, -2]),
    ("SPLIT_TO_MAP('a:1//b:2/c/a:3:4', '/', ':')", {"a": "3", "b": "2"}),
    ("SPLIT_TO_MAP('a:1', ':', ':')", None),
    ("INT_FROM_BYTES(TO_BYTES('AAAH5Q==', 'base64'))", 2021),
    ("INT_FROM_BYTES(TO_BYTES('5QcAAA==', 'base64'), 'LITTLE_ENDIAN')", 2021),
    ("INT_FROM_BYTES(TO_BYTES('5QcA', 'base64'))", None),
    ("BIGINT_FROM_BYTES(TO_BYTES('//////////8=', 'base64'))", -1),
    ("DOUBLE_FROM_BYTES(TO_BYTES('QICm/ZvJ9YI=', 'base64'))", 532.8738323),
    # user lists coerced to a common type (ksqlDB's CoercionUtil)
    ("ARRAY[NULL, 10, '2e1', N, B]", [None, 10, 20, 7, -7]),
    ("MAP(S := TRUE, 'k' := 'true', 10 := 'no')", {"some_string": True, "k": True, "10": False}),
    ("MAP(S := N, NULL := N)", {"some_string": 7, "null": 7}),
    ("MAP('a' := 1, 'a' := 2, S := 3)", {"a": 2, "some_string": 3}),
    ("MAP(N := 1, NULL := 2, 7 := 3)", {7: 3}),
    # STRING arguments parsed as the DATE, TIME or TIMESTAMP a function takes
    ("UNIX_TIMESTAMP(GREATEST(FROM_UNIXTIME(1647734400000), NULL, '2022-06-14'))",
     1655164800000),
    ("LEAST(PARSE_TIME('10:00', 'HH:mm'), NULL, '09:16:00')", 33360000),
    ("INSTR('corporate floor', 'or', -4, 2)", 2), ("INSTR('short', 'or', -4, 2)", 0),
    ("INSTR('corporate floor', 'or', 3, 2)", 14), ("INSTR('aaaa', 'aa', 1, 3)", 3),
    ("INSTR('corporate floor', 'or', 0, 1)", 0), ("INSTR(S, 'o', -1)", 2),
    ("INSTR(S, 'o', 1, 2000000000)", 0),  # no 2e9-element array is built
    ("INSTR(S, 'o', N)", 0), ("INSTR(S, 'o', 20)", 0),
    ("ENCODE('4578616d706C6521', 'hex', 'ascii')", "Example!"),
    ("ENCODE('ce95cebbcebbceacceb4ceb1', 'HEX', 'utf8')", "\u0395\u03bb\u03bb\u03ac\u03b4\u03b1"),
    ("ENCODE('c39c6265726d656e736368', 'hex', 'ascii')", "\ufffd\ufffdbermensch"),
    ("ENCODE('0x578616d706C6521', 'hex', 'base64')", "BXhhbXBsZSE="),
    ("ENCODE('x''4578616d706C6521''', 'hex', 'utf8')", "Example!"),
    ("ENCODE('578616d706C6521', 'hex', 'utf8')", None), ("ENCODE('0x', 'hex', 'utf8')", ""),
    ("ENCODE('RXhhbXBsZSE=', 'base64', 'null')", None),
    ("ENCODE('\u00dcber', 'ascii', 'hex')", "3f626572"),
    ("ENCODE(S, 'utf8', 'base64')", "c29tZV9zdHJpbmc="),
    ("ENCODE('RXhhbXBsZSE', 'base64', S)", None),
    ("JSON_CONCAT('{\"b\": 1, \"a\": 2}', '{\"c\": 3, \"b\": \"x\"}', '{\"a\": null}')",
     '{"b":"x","a":null,"c":3}'),
    ("JSON_CONCAT('[1, 2]', '{\"a\": 1}', '4')", '[1,2,{"a":1},4]'),
    ("JSON_CONCAT('null', 'null')", "[null,null]"), ("JSON_CONCAT('1', '')", None),
    ("JSON_ITEMS('[1, \"x\", null, {\"a\": [2]}]')", ["1", '"x"', "null", '{"a":[2]}']),
    ("JSON_ITEMS('{}')", None),
    ("JSON_ITEMS('[{\"b\": 1, \"a\": {\"z\": 2, \"y\": 3}}]')",  # keys as written
     ['{"b":1,"a":{"z":2,"y":3}}']),
    ("TRUNC(CAST(1.7 AS DECIMAL(12, 7)))", 1), ("TRUNC(CAST(-1.7 AS DECIMAL(12, 7)))", -1),
    ("TRUNC(CAST(-12345.678 AS DECIMAL(12, 7)), -2)", -12300.0),
    # ksqlDB sorts NULLs last in either direction
    ("ARRAY_SORT(A)", [3, 6, None]), ("ARRAY_SORT(ARRAY[2, NULL, 1])", [1, 2, None]),
    ("ARRAY_SORT(ARRAY[2, NULL, 1], 'desc')", [2, 1, None]),
    ("ARRAY_SORT(ARRAY[2, NULL, 1], 'Ascending')", [1, 2, None]),
    ("ARRAY_SORT(ARRAY[2, NULL, 1], 'sideways')", None),
    ("CHR(75)", "K"), ("CHR(99000)", "\U000182b8"), ("CHR(-1)", None), ("CHR(1114112)", None),
    # AS_MAP: a key per key, its value by position, NULL past the values' end
    ("AS_MAP(ARRAY['a', 'b'], ARRAY[1, 2, 3])", {"a": 1, "b": 2}),
    ("AS_MAP(ARRAY['a', 'b', 'c'], ARRAY[1, 2])", {"a": 1, "b": 2, "c": None}),
    ("AS_MAP(ARRAY['a'], CAST(NULL AS ARRAY<INT>))", None),
    ("TO_JSON_STRING(PARSE_TIME('16:43:40', 'HH:mm:ss'))", '"16:43:40"'),
    ("TO_JSON_STRING(PARSE_TIME('16:43', 'HH:mm'))", '"16:43"'),  # LocalTime's text
    # TRANSFORM of a map fails (NULL) on two entries of one key, or on a NULL value
    ("TRANSFORM(M, (k, v) => UCASE(k), (k, v) => v * 2)", {"A": 2, "B": 4}),
    ("TRANSFORM(M, (k, v) => 'same', (k, v) => v)", None),
    ("TRANSFORM(M, (k, v) => k, (k, v) => CAST(NULL AS INT))", None),
    # a NULL key, which Spark's maps cannot hold, as the MAP constructor keeps one: a STRING
    # key as 'null', another left out; a CAST of a map fails on a key that does not convert
    ("TRANSFORM(M, (k, v) => IF(k = 'a', CAST(NULL AS STRING), k), (k, v) => v)",
     {"null": 1, "b": 2}),
    ("TRANSFORM(M, (k, v) => CAST(NULL AS STRING), (k, v) => v)", None),  # two of one key
    ("TRANSFORM(M, (k, v) => IF(k = 'a', CAST(NULL AS INT), v), (k, v) => k)", {2: "b"}),
    ("TRANSFORM(M, (k, v) => CAST(NULL AS INT), (k, v) => k)", None),  # two NULL keys
    ("TRANSFORM(M, (k, v) => IF(k = 'a', CAST(NULL AS INT), v), (k, v) => IF(k = 'a', "
     "CAST(NULL AS STRING), k))", None),  # a NULL key's NULL value
    ("AS_MAP(ARRAY['a', NULL], ARRAY[1, 2])", {"a": 1, "null": 2}),
    ("AS_MAP(ARRAY['a', 'a'], ARRAY[1, 2])", {"a": 2}),
    ("CAST(MAP('1' := 1, 'x' := 2) AS MAP<INT, INT>)", None),
    ("CAST(MAP('1' := 1, '2' := 2) AS MAP<INT, INT>)", {1: 1, 2: 2}),
    ("MAP(CAST(NULL AS INT) := 1, 2 := 2)", {2: 2}),
    # a parameter named as a translation's own lambda variable stays out of that lambda
    ("TRANSFORM(MAP('a' := MAP('1' := '2')), (k, v) => k, (k, v) => CAST(v AS MAP<INT, INT>))",
     {"a": {1: 2}}),
    ("TRANSFORM(ARRAY[ARRAY['1', '2']], e => CAST(e AS ARRAY<INT>))", [[1, 2]]),
    ("LOG(15, 13)", 0.9471572411831843), ("LOG(15, 0)", float("-inf")),
    ("LOG(0, 13)", float("nan")), ("LOG(1, 13)", float("nan")), ("LOG(-15.0, 13.0)", float("nan")),
    ("LOG(15, -13)", float("nan")), ("LOG(CAST(NULL AS INT), 13)", None),
    ("LOG(1, CAST(NULL AS INT))", None), ("LOG(CAST(NULL AS DOUBLE), 0.0)", None),
    # BYTES split and joined byte by byte, bytes beyond ASCII included
    ("SPLIT(TO_BYTES('ff2e00', 'hex'), TO_BYTES('.', 'utf8'))", [b"\xff", b"\x00"]),
    ("SPLIT(TO_BYTES('ab', 'utf8'), TO_BYTES('', 'utf8'))", [b"a", b"b"]),
    ("SPLIT(TO_BYTES('610a', 'hex'), TO_BYTES('', 'utf8'))", [b"a", b"\n"]),  # a last newline
    ("SPLIT(TO_BYTES('615c4562', 'hex'), TO_BYTES('5c45', 'hex'))", [b"a", b"b"]),  # \E
    ("CONCAT_WS(TO_BYTES('-', 'utf8'), TO_BYTES('ff', 'hex'), NULL, TO_BYTES('b', 'utf8'))",
     b"\xff-b"),
    ("JSON_RECORDS('{\"a\": \"x\", \"b\": [1, 2], \"c\": null}')",
     {"a": "x", "b": "[1,2]", "c": "null"}),
    ("JSON_RECORDS('[1]')", None), ("JSON_RECORDS('nope')", None),
    ("JSON_RECORDS('{\"a\": {\"z\": 1, \"b\": 2}}')", {"a": '{"z":1,"b":2}'}),  # in order
    ("JSON_ARRAY_CONTAINS('[1, \"a\", 2.5, true, null, [3]]', 1)", True),
    ("JSON_ARRAY_CONTAINS('[1.0, 2]', 1)", False),  # a JSON integer only for an INT
    ("JSON_ARRAY_CONTAINS('[1.0, 2]', CAST(1.0 AS DOUBLE))", True),
    ("JSON_ARRAY_CONTAINS('[1]', CAST(1.0 AS DOUBLE))", False),
    ("JSON_ARRAY_CONTAINS('[1.0]', 1.0)", False),  # 1.0 is a DECIMAL, no JSON value's kind
    ("JSON_ARRAY_CONTAINS('[\"Pink\"]', 'Pink')", True),
    ("JSON_ARRAY_CONTAINS('[[3]]', 3)", False), ("JSON_ARRAY_CONTAINS('[true]', true)", True),
    ("JSON_ARRAY_CONTAINS('[1, null]', NULL)", True), ("JSON_ARRAY_CONTAINS('{}', 1)", False),
    ("JSON_ARRAY_CONTAINS('[', 1)", False),
]


def test_scalar_functions_have_ksqldb_meaning_in_spark(spark: Any) -> None:
    expressions = [e for e, _ in SCALARS]
    [row] = evaluate(spark, ", ".join(expressions))
    wrong = [(e, want, got) for (e, want), got in zip(SCALARS, row, strict=True)
             if not _same(got, want)]
    assert not wrong, wrong


def _same(got: Any, want: Any) -> bool:
    if isinstance(got, decimal.Decimal):
        got = float(got)
    if isinstance(want, float) and isinstance(got, int | float):
        return ((math.isinf(want) and got == want) or (math.isnan(want) and math.isnan(got))
                or math.isclose(got, want, rel_tol=1e-9))
    if hasattr(got, "asDict"):
        got = got.asDict()
    if isinstance(got, float) and isinstance(want, int) and not isinstance(want, bool):
        return got == want
    return bool(got == want)


def test_aggregates_have_ksqldb_meaning_in_spark(spark: Any) -> None:
    rows = [{**ROW, "N": n, "S": s, "ROWOFFSET_": i}
            for i, (n, s) in enumerate([(1, "a"), (5, "b"), (None, None), (3, "a")])]
    _names, sql = _translated("COUNT(*), COUNT(N), SUM(N), SUM(CAST(NULL AS INT)), MAX(N), "
                             "TOPK(N, 2), TOPKDISTINCT(S, 5), HISTOGRAM(S), LATEST_BY_OFFSET(S), "
                             "EARLIEST_BY_OFFSET(N), COLLECT_SET(S), AVG(N), COLLECT_LIST(N), "
                             "EARLIEST_BY_OFFSET(N, 3), LATEST_BY_OFFSET(N, 2, false), "
                             "LATEST_BY_OFFSET(N, 3), TOPK(N, S, 3), SUM_LIST(A), "
                             # a zone's wall time, deterministic: it can be an aggregate's argument
                             "LATEST_BY_OFFSET(TIMESTAMPTOSTRING(ID, 'yyyy-MM-dd HH', 'Asia/Tokyo')), "
                             # ksqlDB's STDDEV_SAMP is the sample variance, STDDEV_SAMPLE its root
                             "STDDEV_SAMP(N), STDDEV_SAMPLE(N), STDDEV_SAMP(CAST(NULL AS INT)), "
                             "COLLECT_SET(M)",  # MAPs, which Spark cannot order
                             grouped=True)
    _results, image = run_script(SOURCE)
    schema = ", ".join(f"`{c.name}` {spark_type(c.type)}" for c in image.sources["S"].columns)
    spark.createDataFrame(rows, schema).createOrReplaceTempView("S")
    [row] = spark.sql(f"SELECT {', '.join(sql)} FROM S GROUP BY ID").collect()
    assert list(row)[:10] == [4, 3, 9, 0, 5, [5, 3], ["b", "a"], {"a": 2, "b": 1}, "a", 1]
    assert row[10] == ["a", "b", None] and row[11] == 3.0
    assert list(row)[12:16] == [[1, 5, None, 3], [1, 5, 3], [None, 3], [1, 5, 3]]
    assert [r.asDict() for r in row[16]] == [{"sort_col": 5, "col0": "b"},
                                             {"sort_col": 3, "col0": "a"},
                                             {"sort_col": 1, "col0": "a"}]
    assert row[17] == 36
    assert row[18] == "1970-01-01 09"
    assert list(row)[19:22] == [4.0, 2.0, 0.0]  # of 1, 5 and 3; of no values 0.0
    assert row[22] == [{"a": 1, "b": 2}]  # every row's M is the same map


def test_a_decimal_sum_beyond_its_precision_fails_as_ksqldb_throws(spark: Any) -> None:
    _names, sql = _translated("SUM(CAST(N AS DECIMAL(2, 1)))", grouped=True)
    _results, image = run_script(SOURCE)
    schema = ", ".join(f"`{c.name}` {spark_type(c.type)}" for c in image.sources["S"].columns)
    fits = [{**ROW, "N": n, "ROWOFFSET_": i} for i, n in enumerate([4, 5])]
    spark.createDataFrame(fits, schema).createOrReplaceTempView("S")
    [row] = spark.sql(f"SELECT {sql[0]} FROM S GROUP BY ID").collect()
    assert float(row[0]) == 9.0
    beyond = [{**ROW, "N": n, "ROWOFFSET_": i} for i, n in enumerate([4, 6])]
    spark.createDataFrame(beyond, schema).createOrReplaceTempView("S")
    with pytest.raises(Exception, match="Numeric field overflow"):
        spark.sql(f"SELECT {sql[0]} FROM S GROUP BY ID").collect()


def test_untranslatable_calls_say_why() -> None:
    with pytest.raises(functions.UntranslatableError, match="TO_BYTES needs a literal encoding"):
        _translated("TO_BYTES(S, S)")
