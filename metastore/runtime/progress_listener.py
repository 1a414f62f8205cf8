"""A StreamingQueryListener that hands a query's progress to the parts that add it up.

Each query runs in a Spark session of its own, whose queries only that session's listeners hear
(PySpark ties a listener to the JVM it was first added in, which a restart of Spark replaces):
the query's start adds one listener, which gives every micro-batch's progress to each
``hearer`` (the skipped records, the statistics) and says when the query goes idle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql.streaming.listener import StreamingQueryListener

Hearer = Callable[[Any], None]
"""Takes a ``StreamingQueryProgress``."""
IdleHearer = Callable[[str], None]
"""Takes the name of a query that waits for records."""


def listener(*hearers: Hearer, idle: IdleHearer | None = None) -> StreamingQueryListener:
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - Spark's names
            """Nothing has run yet."""

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            for hear in hearers:
                hear(event.progress)

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            name = getattr(event, "name", None)
            if idle is not None and name:
                idle(str(name))

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            """What was added up stays: the query may start again on this node."""

    return Listener()


__all__ = ["listener"]
