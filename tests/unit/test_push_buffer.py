"""A push query whose client stops reading holds a bounded number of bytes: Spark's thread waits
in ``deliver`` once the encoded rows buffered reach ``max_buffered_bytes``."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from metastore.runtime.push import PushQuery, PushSettings
from tests.support.waiting import eventually

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
    eventually(lambda: len(delivered) == 6, 10, "six batches of about 10 KiB buffered")
    time.sleep(0.3)
    assert len(delivered) == 6 and thread.is_alive(), "the query ran past the byte bound"
    rows = query.take()
    assert rows is not None and len(rows) == 60
    eventually(lambda: len(delivered) == 12, 10, "six more once the client read")
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
