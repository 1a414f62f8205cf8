"""A query is analysed once: the analysis says what it reads, and the runtime check gets it."""

from __future__ import annotations

from metastore.catalog.model import DataSource
from metastore.engine.analysis import Analysis, analyse
from metastore.engine.validation import Validator, Write
from metastore.sql.parser import parse
from metastore.sql.statements import CreateAsSelect, InsertInto, SelectStatement
from metastore.testing.check import AssumedTopics, run_script

BASE = """
CREATE STREAM S (ID INT KEY, V INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');
CREATE TABLE T (ID INT PRIMARY KEY, NAME STRING) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON');
CREATE TABLE U (ID INT PRIMARY KEY, N INT) WITH (KAFKA_TOPIC='u', VALUE_FORMAT='JSON');
"""


def test_the_analysis_lists_what_a_query_reads_with_aliases_and_join_shapes() -> None:
    _, image = run_script(BASE)
    [statement] = parse("SELECT s1.ID, COUNT(*) FROM S s1 LEFT JOIN T t ON s1.ID = t.ID "
                        "JOIN U ON s1.ID = U.ID WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY s1.ID;")
    assert isinstance(statement, SelectStatement)
    analysis = analyse(statement.query, image.sources, image.types, transient=True)
    assert analysis.query is statement.query
    assert analysis.sources == ("S", "T", "U")
    assert [(r.alias, r.source.name, r.table.name) for r in analysis.reads] == [
        ("S1", "S", "S"), ("T", "T", "T"), ("U", "U", "U")]
    assert [(j.side, j.kind, j.right.alias) for j in analysis.joins] == [
        ("LEFT", "", "T"), ("", "", "U")]
    assert analysis.windowing is not None and analysis.windowing.size_ms == 60_000
    assert analysis.aggregate and analysis.windowed  # ksqlDB windows aggregations only


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
    [statement] = parse("CREATE STREAM X AS SELECT ID, TO_BYTES(CAST(V AS STRING), "
                        "CAST(V AS STRING)) AS M FROM S;")
    assert isinstance(Validator(image, AssumedTopics()).validate(statement), Write)
    results, _ = run_script(BASE + statement.text + ";")
    assert "TO_BYTES needs a literal encoding" in results[-1].message


PEOPLE = """
CREATE STREAM P (ID INT KEY, ADDRESS STRUCT<STREET STRING, TOWN STRING>, AGE INT, NAME STRING)
    WITH (KAFKA_TOPIC='p', VALUE_FORMAT='JSON');
"""


def _derived(script: str, name: str = "OUT") -> str:
    """The schema ``script`` gives ``name``, or the message of the statement that failed."""
    results, image = run_script(PEOPLE + script, runtime_check=False)
    failed = [r for r in results if not r.ok]
    if failed:
        return failed[0].message
    source = image.source(name)
    assert source is not None
    return ", ".join(f"{c.name} {c.type.sql()}{' KEY' if c.is_key else ''}"
                     for c in source.columns)


def test_select_star_partitioned_by_an_expression_gets_the_new_key_and_keeps_the_old_one() -> None:
    assert _derived("CREATE STREAM OUT AS SELECT * FROM P PARTITION BY ABS(AGE);") == (
        "KSQL_COL_0 INTEGER KEY, ADDRESS STRUCT<STREET STRING, TOWN STRING>, AGE INTEGER, "
        "NAME STRING, ID INTEGER")
    assert _derived("CREATE STREAM OUT AS SELECT * FROM P PARTITION BY ADDRESS->TOWN;").startswith(
        "TOWN STRING KEY, ADDRESS STRUCT<STREET STRING, TOWN STRING>, AGE INTEGER, NAME STRING, "
        "ID INTEGER")
    assert _derived("CREATE STREAM OUT AS SELECT * FROM P PARTITION BY ROWOFFSET;").startswith(
        "ROWOFFSET BIGINT KEY, ADDRESS")
    assert _derived("CREATE STREAM OUT AS SELECT * FROM P PARTITION BY NAME;") == (
        "NAME STRING KEY, ADDRESS STRUCT<STREET STRING, TOWN STRING>, AGE INTEGER, ID INTEGER")
    assert _derived("CREATE STREAM OUT AS SELECT * FROM P PARTITION BY NULL;").endswith(
        "NAME STRING, ID INTEGER")


def test_the_projection_computes_a_new_key_from_the_partitioning_expression() -> None:
    _, image = run_script(PEOPLE)
    [statement] = parse("CREATE STREAM OUT AS SELECT * FROM P PARTITION BY ADDRESS->TOWN;")
    assert isinstance(statement, CreateAsSelect)
    analysis = analyse(statement.query, image.sources, image.types, "OUT")
    name, expression = analysis.projection[0]
    assert name == "TOWN" and expression is statement.query.partition_by[0]
    assert [c.name for c in analysis.key_columns] == ["TOWN"]


def test_a_partitioning_expression_gets_a_name_no_input_column_has() -> None:
    script = ("CREATE STREAM S2 (TOWN STRING KEY, KSQL_COL_0 INT, A STRUCT<TOWN STRING>) "
              "WITH (KAFKA_TOPIC='s2', VALUE_FORMAT='JSON');"
              "CREATE STREAM OUT AS SELECT * FROM S2 PARTITION BY A->TOWN;"
              "CREATE STREAM OUT2 AS SELECT * FROM S2 PARTITION BY ABS(KSQL_COL_0);")
    assert _derived(script).startswith("TOWN_1 STRING KEY, KSQL_COL_0 INTEGER")
    assert _derived(script, "OUT2").startswith("KSQL_COL_1 INTEGER KEY, KSQL_COL_0 INTEGER")


def test_generated_column_names_skip_the_names_of_source_columns() -> None:
    script = ("CREATE STREAM S2 (KSQL_COL_3 INT KEY, KSQL_COL_2 INT, KSQL_COL_4 INT) "
              "WITH (KAFKA_TOPIC='s2', VALUE_FORMAT='JSON');"
              "CREATE STREAM OUT AS SELECT ABS(KSQL_COL_2), ABS(KSQL_COL_2), ABS(KSQL_COL_2), * "
              "FROM S2;")
    assert _derived(script) == ("KSQL_COL_3 INTEGER KEY, KSQL_COL_0 INTEGER, KSQL_COL_1 INTEGER, "
                                "KSQL_COL_5 INTEGER, KSQL_COL_2 INTEGER, KSQL_COL_4 INTEGER")
    assert _derived("CREATE STREAM OUT AS SELECT ID, ADDRESS->TOWN, ADDRESS->TOWN FROM P;") == (
        "ID INTEGER KEY, TOWN STRING, TOWN_1 STRING")


def test_a_struct_star_selects_each_field() -> None:
    assert _derived("CREATE STREAM OUT AS SELECT ID, ADDRESS->*, AGE FROM P;") == (
        "ID INTEGER KEY, STREET STRING, TOWN STRING, AGE INTEGER")
    assert _derived("CREATE STREAM OUT AS SELECT ID, AGE->* FROM P;") == (
        "Column AGE is not a STRUCT type.")


def test_a_parenthesised_grouping_list_groups_by_each_expression_in_its_order() -> None:
    assert _derived("CREATE TABLE OUT WITH (KEY_FORMAT='JSON') AS SELECT AGE, NAME, COUNT(*) "
                    "FROM P GROUP BY (NAME, AGE);") == (
        "NAME STRING KEY, AGE INTEGER KEY, KSQL_COL_0 BIGINT")
    assert "GROUP BY requires at least one expression" in _derived(
        "CREATE TABLE OUT AS SELECT COUNT(*) FROM P GROUP BY ();")
    assert "PARTITION BY requires at least one expression" in _derived(
        "CREATE STREAM OUT AS SELECT * FROM P PARTITION BY ();")


def test_keys_must_be_selected_once_and_leave_a_value() -> None:
    two_keys = ("CREATE STREAM S2 (K1 INT KEY, K2 INT KEY, V INT) "
                "WITH (KAFKA_TOPIC='s2', FORMAT='JSON');")
    assert "must include the key columns K1 and K2 in its projection (eg, SELECT K1, K2...)" in (
        _derived(two_keys + "CREATE STREAM OUT AS SELECT K1, V FROM S2;"))
    assert "must include the grouping expressions AGE and NAME in its projection" in _derived(
        "CREATE TABLE OUT AS SELECT COUNT(*) FROM P GROUP BY AGE, NAME;")
    assert _derived("CREATE STREAM OUT AS SELECT ID FROM P;") == (
        "The projection contains no value columns.")
    assert _derived("CREATE STREAM OUT AS SELECT ID, ID AS ID2, AGE FROM P;").startswith(
        "The projection contains a key column (`ID`) more than once, aliased as: ID and ID2.")
    assert _derived("CREATE TABLE OUT AS SELECT AGE, AGE AS A2, COUNT(*) FROM P GROUP BY AGE;"
                    ).startswith("The projection contains a key column more than once: `AGE` and "
                                 "`A2`.")


def test_every_selected_expression_of_an_aggregation_is_grouped_or_aggregated() -> None:
    assert _derived("CREATE TABLE OUT AS SELECT AGE - ID, COUNT(*) FROM P GROUP BY ID - AGE;"
                    ).startswith("Non-aggregate SELECT expression(s) not part of GROUP BY: "
                                 "(AGE - ID)")
    assert _derived("CREATE TABLE OUT AS SELECT NAME, AGE, COUNT(*) FROM P GROUP BY AGE + 1;"
                    ).startswith("Non-aggregate SELECT expression(s) not part of GROUP BY: "
                                 "NAME, AGE")
    assert _derived("CREATE TABLE OUT AS SELECT AGE, SUM(ID) FROM P GROUP BY AGE, SUM(ID);") == (
        "GROUP BY does not support aggregate functions: SUM is an aggregate function.")
    assert _derived("CREATE TABLE OUT AS SELECT AGE + 1 AS K, AS_VALUE(AGE + 1) AS V, "
                    "TRANSFORM(ARRAY[AGE + 1], x => x * 2) AS A, COUNT(*) AS C FROM P "
                    "GROUP BY AGE + 1;") == (
        "K INTEGER KEY, V INTEGER, A ARRAY<INTEGER>, C BIGINT")
