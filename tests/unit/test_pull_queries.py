"""Pull query rules under the settings a request may override (metastore.engine.pull_queries).

The rules with ksqlDB's default settings are data-driven: tests/data/analysis/pull_queries.sql.
"""

from __future__ import annotations

from typing import Any

import pytest

from metastore.engine import overrides
from metastore.engine.overrides import ConfigError
from metastore.testing.check import run_script

SETUP = """
CREATE STREAM CLICKS (USER_ID STRING KEY, PAGE STRING, MS INT)
  WITH (kafka_topic='clicks', value_format='JSON');
CREATE TABLE PER_USER AS SELECT USER_ID, COUNT(*) AS N FROM CLICKS GROUP BY USER_ID;
CREATE TABLE PER_MS AS SELECT MS, COUNT(*) AS N FROM CLICKS GROUP BY MS;
CREATE TABLE PER_USER_PAGE WITH (key_format='JSON') AS
  SELECT USER_ID, PAGE, COUNT(*) AS N FROM CLICKS GROUP BY USER_ID, PAGE;
CREATE TABLE PER_USER_WINDOW AS
  SELECT USER_ID, COUNT(*) AS N FROM CLICKS WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY USER_ID;
"""

NO_SCANS = {"ksql.query.pull.table.scan.enabled": False}
NO_RANGES = {**NO_SCANS, "ksql.query.pull.range.scan.enabled": "false"}


def outcome(statement: str, properties: dict[str, Any]) -> str | None:
    """The error of ``statement`` after SETUP under ``properties``; None when accepted."""
    results, _ = run_script(SETUP + statement, runtime_check=False,
                            config=overrides.resolve(properties))
    assert all(r.ok for r in results[:-1]), [r.message for r in results if not r.ok]
    return None if results[-1].ok else results[-1].message


@pytest.mark.parametrize(("statement", "properties", "expected"), [
    # table scans disabled: every conjunction looks up every key with '='
    ("SELECT * FROM PER_USER;", NO_SCANS, "Missing WHERE clause.  See https://cnfl.io/queries"),
    ("SELECT * FROM PER_USER WHERE N = 3;", NO_SCANS,
     "WHERE clause missing key column for disjunct: (N = 3)."),
    ("SELECT * FROM PER_USER WHERE USER_ID = 'a' OR N = 3;", NO_SCANS,
     "WHERE clause missing key column for disjunct: (N = 3)."),
    ("SELECT * FROM PER_USER WHERE USER_ID <> 'a';", NO_SCANS,
     "Bound on key columns '[`USER_ID` STRING KEY]' must currently be '='. "),
    ("SELECT * FROM PER_USER WHERE USER_ID = 'a' AND USER_ID IN ('a', 'b');", NO_SCANS,
     "A comparison condition on the key column cannot be combined with other comparisons"),
    ("SELECT * FROM PER_MS WHERE MS * 2 = 4;", NO_SCANS,
     "A comparison must directly reference a key column."),
    ("SELECT * FROM PER_MS WHERE MS = N + 1;", NO_SCANS,
     "A comparison must be between a key column and a resolvable expression."),
    ("SELECT * FROM PER_USER WHERE 'a' LIKE 'a';", NO_SCANS,
     "Like condition must be between strings."),
    ("SELECT * FROM PER_USER_PAGE WHERE USER_ID = 'a';", NO_SCANS,
     "Multi-column sources must specify every key in the WHERE clause. Specified: [`USER_ID`] "
     "Expected: [`USER_ID` STRING KEY, `PAGE` STRING KEY]."),
    ("SELECT * FROM PER_USER_WINDOW WHERE WINDOWSTART > 0;", NO_SCANS,
     "WHERE clause missing key column for disjunct: (WINDOWSTART > 0).  See"),
    # ... a range scan of one STRING key needs no table scan, other ranges do
    ("SELECT * FROM PER_USER WHERE USER_ID > 'a';", NO_SCANS, None),
    ("SELECT * FROM PER_USER WHERE USER_ID > 'a';", NO_RANGES,
     "Query requires table scan to be enabled. Table scans can be enabled by setting "
     "ksql.query.pull.table.scan.enabled=true"),
    ("SELECT * FROM PER_MS WHERE MS > 1;", NO_SCANS, "Query requires table scan to be enabled."),
    ("SELECT * FROM PER_USER WHERE USER_ID < 'a' OR USER_ID > 'x';", NO_SCANS,
     "Query requires table scan to be enabled."),
    ("SELECT * FROM PER_USER_WINDOW WHERE USER_ID > 'a';", NO_SCANS,
     "Query requires table scan to be enabled."),
    ("SELECT * FROM PER_USER_PAGE WHERE USER_ID = 'a' AND PAGE > 'p';", NO_SCANS,
     "Query requires table scan to be enabled."),
    ("SELECT * FROM PER_USER_PAGE WHERE USER_ID = 'a' AND PAGE = 'p' OR USER_ID = 'b' AND "
     "PAGE IN ('p', 'q');",
     NO_SCANS, None),
    ("SELECT * FROM PER_USER_WINDOW WHERE USER_ID = 'a' AND WINDOWSTART >= 10;", NO_SCANS, None),
    # the same with table scans (the default)
    ("SELECT * FROM PER_USER WHERE USER_ID <> 'a';", {}, None),
    ("SELECT * FROM PER_MS WHERE MS > 1 AND MS * 2 = N;", {}, None),
    # key values convert to the key's type as ksqlDB's strict coercer does
    ("SELECT * FROM PER_MS WHERE MS IN (1, 1e10);", {},
     "'1.0E10' can not be converted to the type of the key column: MS INTEGER KEY"),
    ("SELECT * FROM PER_MS WHERE MS IN (1, 3000000000);", {},
     "'3000000000' can not be converted to the type of the key column: MS INTEGER KEY"),
    # LIMIT and streams
    ("SELECT * FROM CLICKS LIMIT 2;", {"ksql.query.pull.limit.clause.enabled": False},
     "LIMIT clause in pull queries is currently disabled. You can enable them by setting "
     "ksql.query.pull.limit.clause.enabled=true. See https://cnfl.io/queries"),
    ("SELECT * FROM CLICKS EMIT CHANGES LIMIT 2;",
     {"ksql.query.pull.limit.clause.enabled": False}, None),
    ("SELECT * FROM CLICKS;", {"ksql.query.pull.stream.enabled": "FALSE"},
     "Pull queries on streams are disabled. To create a push query on the stream, add EMIT "
     "CHANGES to the end."),
    ("SELECT * FROM CLICKS EMIT CHANGES;", {"ksql.query.pull.stream.enabled": False}, None),
])
def test_pull_query(statement: str, properties: dict[str, Any], expected: str | None) -> None:
    error = outcome(statement, properties)
    if expected is None:
        assert error is None
    else:
        assert error is not None and expected in error


def test_pull_query_switches_are_booleans() -> None:
    config = overrides.resolve({"ksql.query.pull.table.scan.enabled": " False "})
    assert config.flag("ksql.query.pull.table.scan.enabled", True) is False
    with pytest.raises(ConfigError, match="Expected value to be either true or false"):
        overrides.resolve({"ksql.query.pull.range.scan.enabled": "sometimes"})
