"""``POST /ksql/terminate`` (ksqlDB's ``TERMINATE CLUSTER``): every persistent query
terminated, every stream, table and type dropped, and the Kafka topics of the sources queries
created (``CREATE ... AS SELECT``) deleted where a pattern of ``deleteTopicList`` matches their
whole name (Java's ``matches``, as ksqlDB's).

ksqlDB writes one command that each server executes by closing its queries, deleting the
topics, and going to TERMINATED; the command topic is deleted too. Here the command log is the
service's history and its nodes keep serving, so the termination is ordinary statements through
the writer: ``TERMINATE ALL``, then a ``DROP`` of each source (``DELETE TOPIC`` for the matched
query sinks, after the others) and of each type, in requests of at most the node's
``max_statements``. Every node applies them as it applies any statement (their queries stop,
their Spark catalogs drop the views), and the service is empty and serving at once. What another
client adds meanwhile is not dropped; a source another client dropped first fails the
termination with the statement's error, and asking again finishes it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from metastore.catalog.image import Image
from metastore.catalog.model import DataSource

STATEMENT_TEXT = "TERMINATE CLUSTER;"
COMMAND_ID = "cluster/TerminateCluster/terminate"
MAX_PATTERNS = 100
MAX_PATTERN_CHARS = 249
"""A topic name's longest, as Kafka bounds it: a pattern longer has no use here."""


class TerminateRequestError(ValueError):
    """A ``/ksql/terminate`` body ksqlDB would refuse (400, its message)."""


def delete_patterns(body: object) -> list[re.Pattern[str]]:
    """The compiled ``deleteTopicList`` of a decoded request body (``{}`` is enough; null is
    none)."""
    if not isinstance(body, dict):
        raise TerminateRequestError("Invalid JSON in request: expected an object")
    listed = body.get("deleteTopicList") or []
    if not isinstance(listed, list) or not all(isinstance(p, str) for p in listed):
        raise TerminateRequestError("Invalid JSON in request: deleteTopicList is a list of "
                                    "strings")
    if len(listed) > MAX_PATTERNS or any(len(p) > MAX_PATTERN_CHARS for p in listed):
        raise TerminateRequestError(f"deleteTopicList takes at most {MAX_PATTERNS} patterns of "
                                    f"at most {MAX_PATTERN_CHARS} characters each")
    patterns = []
    for pattern in listed:
        try:
            patterns.append(re.compile(pattern))
        except (re.error, RecursionError, OverflowError) as error:
            raise TerminateRequestError(f"Invalid pattern: {pattern}") from error
    return patterns


def requests(image: Image, patterns: Sequence[re.Pattern[str]], max_statements: int
             ) -> tuple[list[str], int]:
    """The requests that empty the catalog of ``image``, in order, none over
    ``max_statements`` statements, and how many statements they hold."""
    deleting = [s for s in image.sources.values() if _deletes_topic(s, patterns)]
    keeping = [s for s in image.sources.values() if not _deletes_topic(s, patterns)]
    statements = ["TERMINATE ALL;"] if image.queries else []
    statements += [f"DROP {s.kind.value} {_quoted(s.name)};" for s in sorted(
        keeping, key=lambda s: s.name)]
    statements += [f"DROP {s.kind.value} {_quoted(s.name)} DELETE TOPIC;" for s in sorted(
        deleting, key=lambda s: s.name)]
    statements += [f"DROP TYPE {_quoted(name)};" for name in sorted(image.types)]
    size = max(1, max_statements)
    return [" ".join(statements[start:start + size])
            for start in range(0, len(statements), size)], len(statements)


def deleted_topics(image: Image, patterns: Sequence[re.Pattern[str]]) -> list[str]:
    """The topics the requests of :func:`requests` delete."""
    return sorted({s.topic for s in image.sources.values() if _deletes_topic(s, patterns)})


def terminated(sequence_number: int, dropped: int) -> list[dict[str, Any]]:
    """ksqlDB's answer: one ``currentStatus`` of ``TERMINATE CLUSTER;``."""
    return [{"@type": "currentStatus", "statementText": STATEMENT_TEXT, "warnings": [],
             "commandId": COMMAND_ID,
             "commandStatus": {"status": "SUCCESS", "queryId": None,
                               "message": f"Cluster terminated: {dropped} statements applied"},
             "commandSequenceNumber": sequence_number}]


def _deletes_topic(source: DataSource, patterns: Sequence[re.Pattern[str]]) -> bool:
    return source.query_id is not None and any(p.fullmatch(source.topic) for p in patterns)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
