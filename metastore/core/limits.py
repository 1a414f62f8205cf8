"""The bounds a request must stay within, and why each exists.

Two kinds of bound live here:

- **Replay bounds** are constants. They keep every record that validation accepts applicable on
  every node, forever, within a fixed amount of interpreter stack and memory: a type nested
  deeper, an expression deeper, a name longer or a statement larger than these is refused before
  anything is written. They are not configurable, because a node configured to accept more could
  write records that its peers' runtimes cannot compile.
- **Request limits** (:class:`RequestLimits`) bound what one request may cost a node and the
  cluster: statements, response size, topics and partitions created. A node's operator may
  change them; they never affect replay.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

MAX_TYPE_DEPTH = 32
"""Nesting of ARRAY, MAP and STRUCT in one type, custom types resolved (``ARRAY<INT>`` is 2)."""

MAX_NESTING = 24
"""Nesting of parentheses and brackets in one statement (each function call counts one)."""

MAX_EXPRESSION_DEPTH = 256
"""Depth of one expression tree: ``a + b + c`` is 3 deep (the parser keeps it flat, others don't)."""

QUERY_RECURSION_LIMIT = 40 * MAX_EXPRESSION_DEPTH
"""Python frames that typing, translating and generating the SQL of an expression
:data:`MAX_EXPRESSION_DEPTH` deep may use (a few dozen per level; sqlglot recurses). Validation
and planning run under at least this limit (:func:`allow_deep_expressions`), so a query that
validates also plans."""


def allow_deep_expressions() -> None:
    """Raise the interpreter's recursion limit to :data:`QUERY_RECURSION_LIMIT` if it is lower.
    Python 3.11 keeps Python-to-Python calls off the C stack, so this needs no larger threads."""
    if sys.getrecursionlimit() < QUERY_RECURSION_LIMIT:
        sys.setrecursionlimit(QUERY_RECURSION_LIMIT)


MAX_NAME_LENGTH = 200
"""Characters in a source, column, field or type name (names become Spark and Hive identifiers)."""

MAX_STATEMENT_CHARS = 128 * 1024
"""Characters in one statement: its command record must fit Kafka's default 1 MB message."""

MAX_SUBSTITUTED_CHARS = 1024 * 1024
"""Characters variable substitution may add to one request, over all its statements: a small
body must not expand into hundreds of megabytes of statements to parse."""

MAX_RECORD_BYTES = 900 * 1024
"""Bytes of one encoded command record, below the command topic's 1 MB ``max.message.bytes``."""

MAX_TOPIC_NAME_LENGTH = 249
"""Kafka's own limit on topic names."""

MAX_REPLICAS = 32_767
"""Kafka stores a replication factor in a 16-bit integer."""


@dataclass(frozen=True)
class RequestLimits:
    """What one ``POST /ksql`` request may cost; the defaults suit a shared production cluster."""

    max_statements: int = 1000
    """Statements in one request (a whole script is one request)."""
    max_response_bytes: int = 16 * 1024 * 1024
    """Approximate JSON size of one response; larger answers are refused, not truncated."""
    max_topics_created: int = 50
    """Kafka topics one request may create."""
    max_partitions_per_topic: int = 1000
    """Partitions of one topic a statement may create."""
    max_partitions_created: int = 5000
    """Partitions, all topics together, one request may create."""

    def __post_init__(self) -> None:
        for name in ("max_statements", "max_response_bytes", "max_topics_created",
                     "max_partitions_per_topic", "max_partitions_created"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")


MAX_SERIES_ELEMENTS = 1_000_000
"""Elements one GENERATE_SERIES call may produce: a value, like a record, must fit a node's memory
many times over (a million BIGINTs is 8 MB in Spark)."""

MAX_PADDED_CHARS = 1024 * 1024
"""Characters (bytes, for BYTES) one LPAD or RPAD may produce: no more than one record of Kafka's
default ``max.message.bytes`` could hold."""
