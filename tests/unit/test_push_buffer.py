"""A push query whose client stops reading holds a bounded number of bytes: Spark's thread waits
in ``deliver`` once the encoded rows buffered reach ``max_buffered_bytes``."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from metastore.queries.push import PushQuery, PushSettings

ROW_VALUE = "v" * 1000


def test_a_client_that_stops_reading_holds_back_the_query_at_the_byte_bound(
        tmp_path: Path) -> None:
    settings = PushSettings(max_buffered_batches=100, max_buffered_bytes=64 * 1024)
    query = PushQuery("transient_T_1", (), None, settings, tmp_path / "cp", lambda _q: None)
    delivered: list[int] = []

    def spark_thread() -> None:
        for batch in range(50):  # 50 micro-batches of 10 rows of about 1 KB
            query.deliver([(batch, ROW_VALUE, False)] * 10)
            delivered.append(batch)

    thread = threading.Thread(target=spark_thread, daemon=True)
    thread.start()
    time.sleep(0.5)
    assert len(delivered) <= 7, "the query ran ahead of a client that does not read"
    assert thread.is_alive()
    rows = query.take()
    assert rows is not None and 10 <= len(rows) <= 70
    assert all(row.columns.startswith(b"[") and b'"vvv' in row.columns for row in rows)
    query.close()
    thread.join(5)
    assert not thread.is_alive(), "closing the query releases Spark's thread"


def test_one_batch_larger_than_the_bound_is_taken_when_nothing_is_buffered(
        tmp_path: Path) -> None:
    settings = PushSettings(max_buffered_bytes=1024)
    query = PushQuery("transient_T_2", (), None, settings, tmp_path / "cp", lambda _q: None)
    query.deliver([(1, ROW_VALUE, False), (2, ROW_VALUE, True)])
    rows = query.take()
    assert rows is not None and [row.tombstone for row in rows] == [False, True]
    assert rows[0].columns == b'[1,"' + ROW_VALUE.encode() + b'"]'
