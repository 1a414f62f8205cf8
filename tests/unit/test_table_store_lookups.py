"""Which pull queries a table's store answers (:func:`metastore.runtime.materialized.lookup_of`):
key lookups, range scans of keys and plain columns; everything else is Spark's."""

from __future__ import annotations

import pytest

from metastore.engine.overrides import NO_OVERRIDES
from metastore.runtime.materialized import Lookup, lookup_of
from metastore.spark.query import check_pull_query
from metastore.testing.check import run_script

SETUP = """
CREATE SOURCE TABLE T (ID INT PRIMARY KEY, NAME STRING, N BIGINT)
    WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON', PARTITIONS=1);
CREATE SOURCE TABLE S (K STRING PRIMARY KEY, V INT)
    WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON', PARTITIONS=1);
CREATE SOURCE TABLE W (A INT PRIMARY KEY, V INT)
    WITH (KAFKA_TOPIC='w', VALUE_FORMAT='JSON', PARTITIONS=1, WINDOW_TYPE='TUMBLING',
          WINDOW_SIZE='1 MINUTE');
CREATE STREAM X (ID INT KEY, V INT) WITH (KAFKA_TOPIC='x', VALUE_FORMAT='JSON', PARTITIONS=1);
"""


def lookup(query: str) -> Lookup | None:
    _, image = run_script(SETUP)
    return lookup_of(check_pull_query(query, image, NO_OVERRIDES))


@pytest.mark.parametrize(("query", "names", "indexes", "keys"), [
    ("SELECT * FROM T WHERE ID = 3;", ("ID", "NAME", "N"), (0, 1, 2), {(3,)}),
    ("SELECT N, ID FROM T WHERE ID IN (1, 2) OR ID = -5;", ("N", "ID"), (2, 0),
     {(1,), (2,), (-5,)}),
    ("SELECT NAME AS X FROM T;", ("X",), (1,), None),
    ("SELECT * FROM S WHERE K = 'a';", ("K", "V"), (0, 1), {("a",)}),
    ("SELECT * FROM W WHERE A = 1;", ("A", "WINDOWSTART", "WINDOWEND", "V"), (0, 1, 2, 3),
     {(1,)}),
])
def test_key_lookups_and_plain_columns_are_the_stores(
        query: str, names: tuple[str, ...], indexes: tuple[int, ...],
        keys: set[tuple[object, ...]] | None) -> None:
    found = lookup(query)
    assert found is not None
    assert (found.names, found.indexes) == (names, indexes)
    assert found.keys == (None if keys is None else frozenset(keys))


def test_a_windowed_tables_bounds_filter_its_rows() -> None:
    found = lookup("SELECT V FROM W WHERE A = 1 AND WINDOWSTART >= 60000 AND 120000 > WINDOWEND;")
    assert found is not None and found.keys == frozenset({(1,)})
    assert found.bounds == ((1, "GTE", 60000), (2, "LT", 120000))
    assert found.admits((1, 60000, 119999, 5)) and not found.admits((1, 60000, 120000, 5))
    assert not found.admits((1, 59999, 100000, 5))


def test_range_scans_of_keys_bound_every_row() -> None:
    found = lookup("SELECT * FROM T WHERE ID > 3 AND ID <= 10;")
    assert found is not None and found.keys is None
    assert found.bounds == ((0, "GT", 3), (0, "LTE", 10))
    assert [found.admits((i, "n", 0)) for i in (3, 4, 10, 11)] == [False, True, True, False]


@pytest.mark.parametrize("query", ["SELECT * FROM T WHERE ID > 3;",
                                   "SELECT * FROM T WHERE ID BETWEEN 1 AND 5;",
                                   "SELECT * FROM S WHERE K <= 'm';",
                                   "SELECT V FROM W WHERE A = 1 AND WINDOWEND > 0;"])
def test_a_null_in_a_bounded_column_is_never_in_range(query: str) -> None:
    """A table's row may hold NULL where a bound looks (a key column of a JSON key that has
    none): no comparison with NULL is true in SQL, so the row is not in the range."""
    found = lookup(query)
    assert found is not None and found.bounds
    width = 4 if "FROM W" in query else 3 if "FROM T" in query else 2
    assert not found.admits((None,) * width)
    between = lookup("SELECT K FROM S WHERE K BETWEEN 'b' AND 'd';")
    assert between is not None and between.keys is None
    assert [between.admits((k, 1)) for k in ("a", "b", "c", "d", "da")] == [
        False, True, True, True, False]
    both = lookup("SELECT * FROM T WHERE ID IN (1, 5) AND ID > 2;")
    assert both is not None and both.keys == frozenset({(1,), (5,)})
    assert not both.admits((1, "n", 0)) and both.admits((5, "n", 0))


@pytest.mark.parametrize("query", [
    "SELECT ID, UCASE(NAME) FROM T WHERE ID = 3;",  # an expression
    "SELECT * FROM T WHERE N = 3;",  # not the key
    "SELECT * FROM T WHERE ID > 3 OR ID < 1;",  # ranges in ORs
    "SELECT * FROM T WHERE ID > N;",  # not a literal
    "SELECT * FROM T WHERE ID = 3 AND N = 4;",  # more than the key
    "SELECT * FROM T WHERE ID = 1 OR N = 2;",  # a scan
    "SELECT * FROM T WHERE ID = 3 LIMIT 1;",
    "SELECT * FROM W WHERE (A = 1 OR A = 2) AND WINDOWSTART > 0;",  # bounds and ORs
    "SELECT * FROM W WHERE A = 1 AND WINDOWSTART > ROWTIME;",
    "SELECT * FROM X WHERE ID = 1;",  # a stream
    "SELECT ROWTIME, ID FROM T WHERE ID = 1;",  # a pseudo column
])
def test_everything_else_is_sparks(query: str) -> None:
    assert lookup(query) is None
