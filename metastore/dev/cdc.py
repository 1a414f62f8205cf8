"""The change-data-capture walkthrough: a PostgreSQL table streamed by Debezium into Kafka, a
table over its change topic, a CTAS counting its rows per country, and pull queries answering
from it while rows are inserted, updated and deleted in PostgreSQL.

Its statements are ``examples/cdc/`` (PostgreSQL's ``postgres.sql``, the node's
``pipeline.sql`` with ``${...}`` variables); ``metastore dev cdc`` runs it on the local cluster
(``metastore dev up --connect --postgres``), and the test suite on its own services, through
the same :class:`Walkthrough`. Everything it makes is named after one prefix (``cdc`` on the
local cluster), so that two runs on one broker do not meet.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from metastore.dev.exceptions import LocalInfraError
from metastore.dev.local_service import ServiceState
from metastore.dev.postgres import psql

CHANGES = (
    ("insert Dana (NL)", "INSERT INTO customers VALUES (4, 'Dana', 'NL');",
     {"NL": 2, "DE": 1, "FR": 1}),
    ("move Bo from DE to FR", "UPDATE customers SET country = 'FR' WHERE id = 2;",
     {"NL": 2, "DE": 0, "FR": 2}),
    ("delete Ann", "DELETE FROM customers WHERE id = 1;", {"NL": 1, "DE": 0, "FR": 2}),
)
"""The walkthrough's changes in PostgreSQL and the counts per country each leads to (a group
whose last row left keeps its row, counting 0, as ksqlDB's table aggregations do)."""
FIRST_COUNTS = {"NL": 1, "DE": 1, "FR": 1}
"""The counts of the rows ``postgres.sql`` inserts, which Debezium's snapshot brings."""


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "cdc"


def example(name: str) -> str:
    """One of the walkthrough's files, ``examples/cdc/<name>`` of the checkout."""
    path = EXAMPLES / name
    if not path.is_file():
        raise LocalInfraError(f"{path} is not there: the walkthrough runs from a checkout of "
                              "the project")
    return path.read_text(encoding="utf-8")


def statements(text: str) -> list[str]:
    """The statements of a script without ``--`` comment lines (its values hold no ';')."""
    kept = "\n".join(line for line in text.splitlines() if not line.strip().startswith("--"))
    return [statement.strip() + ";" for statement in kept.split(";") if statement.strip()]


@dataclass
class Walkthrough:
    """The walkthrough on ``postgres``, its connector through the node at ``connect_url`` and
    its tables and pull queries through the node at ``query_url`` (one node, where every node
    has Spark and Connect)."""

    postgres: ServiceState
    connect_url: str
    query_url: str
    prefix: str = "cdc"
    say: Callable[[str], None] = print
    timeout: float = 180.0
    counts_seen: list[dict[str, int]] = field(default_factory=list)

    @property
    def variables(self) -> dict[str, str]:
        name = self.prefix.replace("-", "_").upper()
        return {"pg_port": str(self.postgres.port), "prefix": self.prefix,
                "connector": f"{name}_CUSTOMERS", "slot": name.lower(),
                "table": f"{name}_CUSTOMERS", "counts": f"{name}_PER_COUNTRY"}

    def run(self) -> None:
        """Every step: the database, the pipeline, then each change and its counts."""
        self.prepare_database()
        self.create_pipeline()
        self.wait_for_counts(FIRST_COUNTS, "the snapshot Debezium took")
        for what, sql, expected in CHANGES:
            self.say(f"PostgreSQL: {sql}")
            psql(self.postgres, sql)
            self.wait_for_counts(expected, what)

    def prepare_database(self) -> None:
        self.say("PostgreSQL: the customers table and its first rows (examples/cdc/postgres.sql)")
        psql(self.postgres, example("postgres.sql"))

    def create_pipeline(self) -> None:
        """The connector first (through the Connect node), then the tables."""
        pipeline = statements(example("pipeline.sql"))
        connector = [s for s in pipeline if "CONNECTOR" in s]
        tables = [s for s in pipeline if "CONNECTOR" not in s]
        for url, part in ((self.connect_url, connector), (self.query_url, tables)):
            for statement in part:
                self.say(f"ksql> {_first_line(statement)}")
                self._ksql(url, statement)

    def wait_for_counts(self, expected: dict[str, int], what: str) -> None:
        deadline = time.monotonic() + self.timeout
        while True:
            counts = self.counts()
            if counts == expected:
                self.counts_seen.append(counts)
                self.say(f"  {what}: {_shown(counts)}")
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: the counts per country were {_shown(counts)} after "
                                   f"{self.timeout:.0f}s, not {_shown(expected)}")
            time.sleep(1)

    def counts(self) -> dict[str, int]:
        """The CTAS's rows by pull query: country to count."""
        answer = httpx.post(f"{self.query_url}/query", timeout=60, json={
            "ksql": f"SELECT * FROM {self.variables['counts']};"})
        if answer.status_code != 200:
            return {}
        rows = [row for row in answer.json() if isinstance(row, dict) and "row" in row]
        return {str(r["row"]["columns"][0]): int(r["row"]["columns"][1]) for r in rows}

    def _ksql(self, url: str, statement: str) -> Any:
        answer = httpx.post(f"{url}/ksql", timeout=120, json={
            "ksql": statement, "sessionVariables": self.variables,
            "streamsProperties": {"auto.offset.reset": "earliest"}})
        if answer.status_code != 200:
            raise RuntimeError(f"{_first_line(statement)} failed: {answer.text[:1000]}")
        return answer.json()


def _first_line(statement: str) -> str:
    return statement.strip().splitlines()[0]


def _shown(counts: dict[str, int]) -> str:
    return ", ".join(f"{country} {n}" for country, n in sorted(counts.items())) or "none"


__all__ = ["CHANGES", "FIRST_COUNTS", "Walkthrough", "example"]
