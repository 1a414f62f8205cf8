"""Offline validation of a script: ``metastore check FILE.sql``.

Statements run in order against an empty in-memory catalog; topics named in WITH are assumed to
exist (with one partition). The first failure stops the run. Each result is what ``POST /ksql``
would answer for that statement.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from metastore.catalog.image import EMPTY_IMAGE, Delta, Image
from metastore.core.exceptions import MetastoreError
from metastore.engine import responses
from metastore.engine.overrides import ConfigOverrides
from metastore.engine.validation import Read, Skip, Validator, Write
from metastore.kafka import row_encoding
from metastore.planner.plan import stored_plan
from metastore.planner.support import check_runtime
from metastore.server.http.error_codes import error_code
from metastore.sql.exceptions import ParseError
from metastore.sql.statements import CreateSource, Statement
from metastore.sql.variables import parse_request


class AssumedTopics:
    """Every topic exists, with the partitions a CREATE STREAM/TABLE of the script declares for
    it (as ksqlDB's test driver creates them), else one (the offline stand-in for Kafka)."""

    def __init__(self, declared: dict[str, int] | None = None) -> None:
        self._declared = declared or {}

    def partitions(self, topic: str) -> int | None:
        return self._declared.get(topic, 1)

    def broker_count(self) -> int | None:
        return None


@dataclass(frozen=True)
class CheckResult:
    statement: str
    ok: bool
    error_code: int | None
    message: str
    entity: dict[str, Any] | None

    def to_json(self) -> dict[str, Any]:
        return {"statement": self.statement, "ok": self.ok, "error_code": self.error_code,
                "message": self.message, "entity": self.entity}


def run_script(text: str, runtime_check: bool = True,
               config: ConfigOverrides | None = None) -> tuple[list[CheckResult], Image]:
    """Results, one per statement up to the first failure, and the catalog at the end.

    ``runtime_check=False`` validates the catalog rules only, not whether the Spark runtime can
    run each persistent query (to measure conformance with ksqlDB's own rules); ``config``: the
    request's ksqlDB configuration overrides.
    """
    try:
        statements = parse_request(text)
    except ParseError as error:
        return [CheckResult(error.statement or text.strip(), False, error_code(error),
                            error.message, None)], EMPTY_IMAGE
    image = EMPTY_IMAGE
    results: list[CheckResult] = []
    spark_check = check_runtime if runtime_check else None
    topics = AssumedTopics(_declared_partitions(statements))
    for statement in statements:
        try:
            outcome = Validator(image, topics, runtime_check=spark_check, config=config,
                                encoder=row_encoding.encode_record,
                                planner=stored_plan if runtime_check else None).validate(statement)
        except MetastoreError as error:
            results.append(CheckResult(statement.text, False, error_code(error), error.message, None))
            break
        if isinstance(outcome, Write):
            delta = Delta(image)
            delta.execute(outcome.command, image.offset + 1)
            delta.advance(image.offset + 1)
            image = delta.apply()
            entity = responses.current_status(statement, outcome.command, image, image.offset)
            message = entity["commandStatus"]["message"]
        elif isinstance(outcome, Skip):
            entity = responses.warning(statement, outcome.message)
            message = outcome.message
        else:
            assert isinstance(outcome, Read)
            entity = responses.read_entity(statement, image)
            message = ""
        results.append(CheckResult(statement.text, True, None, message, entity))
    return results, image


def _declared_partitions(statements: list[Statement]) -> dict[str, int]:
    """The partitions each CREATE STREAM/TABLE declares for its topic (the first one's)."""
    declared: dict[str, int] = {}
    for statement in statements:
        if not isinstance(statement, CreateSource):
            continue
        topic, partitions = (statement.properties.get(p) for p in ("KAFKA_TOPIC", "PARTITIONS"))
        if isinstance(partitions, int) and not isinstance(partitions, bool) and topic is not None:
            declared.setdefault(str(topic), partitions)
    return declared


def catalog_json(image: Image) -> dict[str, Any]:
    return {"catalog": {
        "sources": [{"name": s.name, "type": s.kind.value, "schema": s.schema_text(),
                     "keyFormat": s.key_format, "valueFormat": s.value_format, "topic": s.topic,
                     "isSource": s.is_source} for s in (image.sources[n] for n in sorted(image.sources))],
        "queries": [{"id": q.query_id, "kind": q.kind, "sink": q.sink, "sources": list(q.sources),
                     "sql": q.sql} for q in (image.queries[i] for i in sorted(image.queries))],
    }}
