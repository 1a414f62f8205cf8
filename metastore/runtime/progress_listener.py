"""A StreamingQueryListener that hands a query's progress to the parts that add it up.

Each query runs in a Spark session of its own, whose queries only that session's listeners hear
(PySpark ties a listener to the JVM it was first added in, which a restart of Spark replaces):
the query's start adds one listener, which gives every micro-batch's progress to each
``hearer`` (the skipped records, the statistics) and says when the query goes idle.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql.streaming.listener import StreamingQueryListener

Hearer = Callable[[Any], None]
"""Takes a ``StreamingQueryProgress``."""
log = logging.getLogger(__name__)

IdleHearer = Callable[[str], None]
"""Takes the name of a query that waits for records."""


def source_offsets(progress: Any) -> list[tuple[str | None, str | None]]:
    """The start and end offsets (Spark's JSON) of each source a micro-batch's progress read."""
    return [(source.startOffset, source.endOffset) for source in progress.sources]


def listener(*hearers: Hearer, idle: IdleHearer | None = None) -> StreamingQueryListener:
    """A listener giving each progress to every one of ``hearers`` (one failing does not keep
    it from the others), and the name of a query that goes idle to ``idle``."""
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class Listener(StreamingQueryListener):
        def __init__(self) -> None:
            self.names: dict[str, str] = {}
            """Query names by Spark's query id: an idle event carries only the id."""

        def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - Spark's names
            if event.name:
                self.names[str(event.id)] = str(event.name)

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            for hear in hearers:
                try:
                    hear(event.progress)
                except Exception:  # one part's bug must not cost the others their figures
                    log.exception("adding up the progress of %s", event.progress.name)

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            name = self.names.get(str(event.id))
            if idle is not None and name is not None:
                idle(name)

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            """What was added up stays: the query may start again on this node."""

    return Listener()


__all__ = ["listener", "source_offsets"]
