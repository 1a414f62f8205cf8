"""A StreamingQueryListener that hands a query's progress to the parts that add it up.

Each query runs in a Spark session of its own, whose queries only that session's listeners hear
(PySpark ties a listener to the JVM it was first added in, which a restart of Spark replaces):
the query's start adds one listener, which gives every micro-batch's progress to each
``hearer`` (the skipped records, the statistics).

PySpark hands a Python listener each progress converted field by field, a Py4J round trip per
field, map entry and source: some hundred calls between the driver JVM and the node's process a
micro-batch of every query, on the cores the queries run on. This listener takes each progress
event as the JSON text Spark writes of it instead (:func:`progress_event`; docs/benchmarks.md,
"listener-cost"). That text gives rates to one decimal, as Spark's UI shows them.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql.streaming.listener import StreamingQueryListener

Hearer = Callable[[Any], None]
"""Takes a ``StreamingQueryProgress``."""
log = logging.getLogger(__name__)

def started_ms(progress: Any) -> int | None:
    """When a micro-batch started (its progress' ``timestamp``), in epoch milliseconds; None
    when the progress has none it can read."""
    timestamp = progress.timestamp
    if not isinstance(timestamp, str):
        return None
    try:
        return int(datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def source_offsets(progress: Any) -> list[tuple[str | None, str | None]]:
    """The start and end offsets (Spark's JSON) of each source a micro-batch's progress read."""
    return [(source.startOffset, source.endOffset) for source in progress.sources]


def listener(*hearers: Hearer) -> StreamingQueryListener:
    """A listener giving each progress to every one of ``hearers`` (one failing does not keep
    it from the others)."""
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class Listener(StreamingQueryListener):
        def __init__(self) -> None:
            self._java: Any = None

        def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - Spark's names
            """Nothing to add up before a micro-batch."""

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            for hear in hearers:
                try:
                    hear(event.progress)
                except Exception:  # one part's bug must not cost the others their figures
                    log.exception("adding up the progress of %s", event.progress.name)

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            """What was added up stays: the query may start again on this node."""

        @property
        def _jlistener(self) -> Any:
            """The JVM's side of this listener, which PySpark's ``addListener`` registers."""
            if self._java is None:
                self._java = _java_listener(self)
            return self._java

    return Listener()


def progress_event(text: str) -> Any:
    """PySpark's ``QueryProgressEvent`` of Spark's JSON text of one. Spark leaves out a source's
    rates that are not finite (two triggers in one millisecond); they are NaN here, as the
    field-by-field conversion gives them."""
    from pyspark.sql.streaming.listener import QueryProgressEvent

    event = json.loads(text)
    for source in event["progress"].get("sources", ()):
        for rate in ("inputRowsPerSecond", "processedRowsPerSecond"):
            source.setdefault(rate, math.nan)
    return QueryProgressEvent.fromJson(event)


def _java_listener(listener: StreamingQueryListener) -> Any:
    """PySpark's JVM wrapper of ``listener``, with each progress event passed as its JSON text
    (converted field by field should that text ever not be read)."""
    from py4j.protocol import Py4JError
    from pyspark import SparkContext
    from pyspark.sql.streaming.listener import JStreamingQueryListener, QueryProgressEvent

    class JsonProgress(JStreamingQueryListener):
        def onQueryProgress(self, jevent: Any) -> None:  # noqa: N802 - Spark's names
            try:
                event = progress_event(jevent.json())
            except (KeyError, TypeError, ValueError, Py4JError):
                log.exception("reading a progress event's JSON text")
                event = QueryProgressEvent.fromJObject(jevent)
            self.pylistener.onQueryProgress(event)

    jvm: Any = SparkContext._jvm
    return jvm.PythonStreamingQueryListenerWrapper(JsonProgress(listener))


__all__ = ["listener", "progress_event", "source_offsets", "started_ms"]
