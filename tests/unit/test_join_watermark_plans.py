"""How far behind the stream time a stream-stream join's record may come and still join: the
join window's size plus its grace, as long as Kafka Streams' join window stores keep a record;
for an outer join whose unmatched records Spark writes (when the watermark passes them), its
grace alone."""

from __future__ import annotations

import pytest

from metastore.planner.plan import compile_query
from metastore.testing.check import run_script

STREAMS = ("CREATE STREAM L (ID BIGINT KEY, A STRING) WITH (kafka_topic='l', value_format='JSON');"
           "CREATE STREAM R (ID BIGINT KEY, B STRING) WITH (kafka_topic='r', value_format='JSON');")
MINUTE, HOUR = 60_000, 3_600_000


def delays(join: str) -> set[int | None]:
    """The watermark delays of the streaming reads of ``L l <join> ON l.id = r.id``."""
    results, image = run_script(STREAMS + "CREATE STREAM O AS SELECT l.id AS ID, A, B FROM L l "
                                          f"{join} ON l.id = r.id;")
    assert all(r.ok for r in results), results
    plan = compile_query(next(iter(image.queries.values())), image)
    return {step.watermark_ms for step in plan.steps
            if step.streaming and step.view.endswith("_decoded")}


@pytest.mark.parametrize(("join", "delay"), [
    ("JOIN R r WITHIN 1 HOUR GRACE PERIOD 10 MINUTES", 2 * HOUR + 10 * MINUTE),
    ("JOIN R r WITHIN (1 HOUR, 2 HOURS) GRACE PERIOD 0 SECONDS", 3 * HOUR),
    ("JOIN R r WITHIN 1 HOUR", 26 * HOUR),  # ksqlDB's default grace: 24 hours
    # an outer join without GRACE PERIOD: its pairs an inner join's, its unmatched records
    # written at once from keyed state
    ("LEFT JOIN R r WITHIN 1 HOUR", 26 * HOUR),
    ("LEFT JOIN R r WITHIN 1 HOUR GRACE PERIOD 10 MINUTES", 10 * MINUTE),
    ("RIGHT JOIN R r WITHIN 1 HOUR GRACE PERIOD 0 SECONDS", 0),
])
def test_a_joined_stream_is_watermarked_by_what_kafka_streams_keeps(join: str,
                                                                     delay: int) -> None:
    assert delays(join) == {delay}
