"""The read step that drops the records a query cannot decode, and how Spark observes it.

A query's streaming read of a source decodes each record with a :data:`READABLE` column
(:func:`metastore.spark.views.decode_select`); :func:`kept` is the step that drops the
unreadable ones (or fails the query on one, under ``ksql.fail.on.deserialization.error``), and
it is *observed* (Spark's ``Dataset.observe``) under the name :func:`observation` gives, with
the metrics :func:`observed_metrics` lists. The runtime's listener
(:mod:`metastore.runtime.skipped`) reads those names back with :func:`observed_read`.
"""

from __future__ import annotations

from metastore.engine.overrides import FAIL_ON_DESERIALIZATION_ERROR

READABLE = "__MS_READABLE"
"""The column that says whether a record of a query's source can be read."""
_PREFIX = "__ms_skipped"
_SEPARATOR = "\u001f"


def observation(source: str, topic: str, view: str) -> str:
    """The name a read of ``source`` (on ``topic``, as the query's ``view``) is observed under."""
    return _SEPARATOR.join((_PREFIX, source, topic, view))


def observed_metrics(partition: str, offset: str) -> tuple[str, ...]:
    """What the observed step measures per micro-batch: records skipped, and the first one's
    partition and offset (by the source's ``partition`` and ``offset`` columns)."""
    return (f"count_if(NOT {READABLE}) AS skipped",
            f"min(CASE WHEN NOT {READABLE} THEN struct({partition} AS partition, {offset} AS "
            "offset) END) AS first")


def kept(view: str, fail: bool) -> str:
    """The readable records of ``view`` (its readability column dropped); with ``fail``, a
    query that meets an unreadable one fails, naming it."""
    if not fail:
        return f"SELECT * EXCEPT ({READABLE}) FROM `{view}` WHERE {READABLE}"
    refused = ("raise_error(concat('A record could not be deserialized ("
               + FAIL_ON_DESERIALIZATION_ERROR + " is true): ', __MS_SOURCE))")
    return (f"SELECT * EXCEPT ({READABLE}) FROM `{view}` "
            f"WHERE CASE WHEN {READABLE} THEN TRUE ELSE {refused} END")


def observed_read(name: str) -> tuple[str, str] | None:
    """The source and topic of an observation named by :func:`observation`; None for other
    observations."""
    parts = name.split(_SEPARATOR)
    if len(parts) != 4 or parts[0] != _PREFIX:
        return None
    return parts[1], parts[2]
