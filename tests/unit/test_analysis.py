"""A query is analysed once: the analysis says what it reads, and the runtime check gets it."""

from __future__ import annotations

from metastore.catalog.analysis import Analysis, analyse
from metastore.catalog.model import DataSource
from metastore.catalog.validation import Validator, Write
from metastore.check import AssumedTopics, run_script
from metastore.sql.parser import parse
from metastore.sql.statements import CreateAsSelect, InsertInto, SelectStatement

BASE = """
CREATE STREAM S (ID INT KEY, V INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');
CREATE TABLE T (ID INT PRIMARY KEY, NAME STRING) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON');
CREATE TABLE U (ID INT PRIMARY KEY, N INT) WITH (KAFKA_TOPIC='u', VALUE_FORMAT='JSON');
"""


def test_the_analysis_lists_what_a_query_reads_with_aliases_and_join_shapes() -> None:
    _, image = run_script(BASE)
    [statement] = parse("SELECT s1.ID, s1.V, t.NAME, U.N FROM S s1 LEFT JOIN T t ON s1.ID = t.ID "
                        "JOIN U ON s1.ID = U.ID WINDOW TUMBLING (SIZE 1 MINUTE);")
    assert isinstance(statement, SelectStatement)
    analysis = analyse(statement.query, image.sources, image.types, transient=True)
    assert analysis.query is statement.query
    assert analysis.sources == ("S", "T", "U")
    assert [(r.alias, r.source.name, r.table.name) for r in analysis.reads] == [
        ("S1", "S", "S"), ("T", "T", "T"), ("U", "U", "U")]
    assert [(j.side, j.kind, j.right.alias) for j in analysis.joins] == [
        ("LEFT", "", "T"), ("", "", "U")]
    assert analysis.windowing is not None and analysis.windowing.size_ms == 60_000
    assert not analysis.aggregate and not analysis.windowed


def test_the_runtime_check_gets_the_analysis_validation_made() -> None:
    _, image = run_script(BASE)
    seen: list[tuple[Analysis, DataSource]] = []

    def record(analysis: Analysis, sink: DataSource) -> None:
        seen.append((analysis, sink))

    validator = Validator(image, AssumedTopics(), runtime_check=record)
    statements = parse("CREATE TABLE X AS SELECT ID, COUNT(*) AS C FROM S WINDOW TUMBLING "
                       "(SIZE 1 MINUTE) GROUP BY ID; CREATE STREAM Y AS SELECT ID, V FROM S; "
                       "INSERT INTO Y SELECT S.ID AS ID, V FROM S JOIN T ON S.ID = T.ID;")
    assert all(isinstance(validator.validate(s), Write) for s in statements)
    assert [(a.sources, a.aggregate, a.windowed, sink.name) for a, sink in seen] == [
        (("S",), True, True, "X"), (("S",), False, False, "Y"), (("S", "T"), False, False, "Y")]
    queries = [s.query for s in statements if isinstance(s, CreateAsSelect | InsertInto)]
    assert [a.query for a, _ in seen] == queries
    assert all(a.query is q for (a, _), q in zip(seen, queries, strict=True))


def test_without_a_runtime_check_only_the_catalog_rules_apply() -> None:
    _, image = run_script(BASE)
    [statement] = parse("CREATE STREAM X AS SELECT ID, ENCODE(CAST(V AS STRING), 'hex', 'utf8') AS M FROM S;")
    assert isinstance(Validator(image, AssumedTopics()).validate(statement), Write)
    results, _ = run_script(BASE + statement.text + ";")
    assert "the function ENCODE is not supported" in results[-1].message
