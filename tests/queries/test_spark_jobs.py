"""Persistent queries compiled and run as Spark streaming jobs, on real Kafka, record by record."""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from metastore.catalog.image import Image
from metastore.kafka.settings import KafkaSettings
from metastore.planner.plan import compile_query
from metastore.planner.steps import QueryPlan
from metastore.runtime import job
from metastore.runtime.checkpoints import (
    STREAM_STATE_MARK,
    TABLE_STATE_MARK,
    WINDOWED_PARTITIONING_MARK,
    CheckpointDir,
    HadoopDir,
    HadoopRoot,
    LocalDir,
    checkpoint_root,
)
from metastore.testing.check import run_script
from tests.support.kafka import unique

Record = tuple[bytes | None, bytes | None, dict[str, bytes]]


@pytest.fixture
def spark(spark: Any) -> Iterator[Any]:
    """The shared session; the streaming queries a test started are stopped after it."""
    yield spark
    for query in spark.streams.active:
        query.stop()


def catalog(text: str) -> Image:
    results, image = run_script(text)
    failed = [r for r in results if not r.ok]
    assert not failed, failed[0].message
    return image


KEPT_SESSIONS = "SESSION (10 SECONDS, RETENTION 1 HOUR, GRACE PERIOD 1 SECOND)"
"""Sessions with a gap of 10 s, a grace period of 1 s and kept an hour after they end."""


def visits(clicks: str, sink: str, window: str, *, final: bool = False) -> Image:
    """A catalog of the stream CLICKS over ``clicks`` and the table VISITS over ``sink``: each
    user's COUNT(*) of clicks in ``window`` (a SESSION window), EMIT FINAL with ``final``."""
    return catalog(f"""
        CREATE STREAM CLICKS (USER_ID INT KEY, PAGE STRING)
            WITH (KAFKA_TOPIC='{clicks}', VALUE_FORMAT='JSON');
        CREATE TABLE VISITS WITH (KAFKA_TOPIC='{sink}', VALUE_FORMAT='DELIMITED') AS
            SELECT USER_ID, COUNT(*) AS N FROM CLICKS WINDOW {window} GROUP BY USER_ID
            {'EMIT FINAL' if final else ''};""")


def keyed_stream_plan(image: Image, sink: str, topic: str) -> QueryPlan:
    """The plan of the query writing ``sink``, which keeps its stream's windows or sessions as
    keyed state and reads no topic in batch; the plan of a checkpoint from before that state
    replays ``topic`` at every micro-batch."""
    query = image.queries[query_id(image, sink)]
    plan = compile_query(query, image)
    assert plan.stream_state and not plan.table_state
    assert plan.batch is not None and not any(step.topic for step in plan.batch.steps), \
        "the stream's topic is not read in batch"
    replayed = compile_query(query, image, stream_state=False).batch
    assert replayed is not None and any(step.topic == topic for step in replayed.steps)
    return plan


def read_all(settings: KafkaSettings, topic: str, count: int, timeout: float = 90) -> list[Record]:
    """At least ``count`` records of ``topic`` (read_committed, from the start)."""
    consumer = Consumer(settings.config(group_id=unique("check"), auto_offset_reset="earliest",
                                        enable_auto_commit=False,
                                        isolation_level="read_committed"))
    consumer.subscribe([topic])
    records: list[Record] = []
    deadline = time.monotonic() + timeout
    try:
        while len(records) < count and time.monotonic() < deadline:
            for message in consumer.consume(100, 0.5):
                if message.error() is None:
                    records.append((message.key(), message.value(),
                                    {k: v for k, v in message.headers() or []}))
    finally:
        consumer.close()
    return records


def run(spark: Any, image: Image, query_id: str, tmp_path: Path, bootstrap: str) -> Any:
    plan = compile_query(image.queries[query_id], image)
    return job.start(spark, plan, LocalDir(tmp_path / query_id),
                     {"kafka.bootstrap.servers": bootstrap})


def run_available_now(spark: Any, plan: Any, checkpoint: Path | CheckpointDir,
                      options: dict[str, str]) -> None:
    """Run ``plan`` over what its sources hold now, to the end."""
    directory = LocalDir(checkpoint) if isinstance(checkpoint, Path) else checkpoint
    streaming = job.start(spark, plan, directory, options, available_now=True)
    assert streaming.awaitTermination(300), "the query finished"
    assert streaming.exception() is None


def delete_all_records(settings: KafkaSettings, *topics: str) -> None:
    """Delete every record of each (one-partition) topic, up to its end offset."""
    admin = AdminClient(settings.config())
    deleted = admin.delete_records([TopicPartition(topic, 0, OFFSET_END) for topic in topics])
    for future in deleted.values():
        future.result(30)


def produce_json(producer: Producer, topic: str, rows: dict[str, dict[str, Any] | None],
                 timestamp: int) -> None:
    """Each row (a tombstone for None) under its string key, as JSON, at ``timestamp``."""
    for key, value in rows.items():
        producer.produce(topic, key=key.encode(),
                         value=None if value is None else json.dumps(value), timestamp=timestamp)


def int_key(value: int) -> bytes:
    return struct.pack(">i", value)


def query_id(image: Image, sink: str) -> str:
    source = image.source(sink)
    assert source is not None and source.query_id is not None
    return source.query_id


def test_filter_csas_writes_each_matching_record_with_its_source(
        spark: Any, kafka_bootstrap: str, kafka_settings: KafkaSettings,
        topic_factory: Callable[..., str], producer_factory: Callable[..., Producer],
        tmp_path: Path) -> None:
    source, sink = topic_factory(partitions=2), topic_factory()
    image = catalog(f"""
        CREATE STREAM ORDERS (ID INT KEY, ITEM STRING, AMOUNT DOUBLE, AT TIMESTAMP)
            WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON');
        CREATE STREAM BIG WITH (KAFKA_TOPIC='{sink}') AS
            SELECT ID, UCASE(ITEM) AS ITEM, AMOUNT * 2 AS TWICE, AT FROM ORDERS
            WHERE AMOUNT > 10 EMIT CHANGES;""")
    producer = producer_factory()
    inputs = [(i, f"item{i}", float(i * 3)) for i in range(12)]
    for i, item, amount in inputs:
        producer.produce(source, key=int_key(i), partition=i % 2,
                         value=json.dumps({"ITEM": item, "AMOUNT": amount, "AT": 1000 + i}))
    producer.flush(10)
    streaming = run(spark, image, query_id(image, "BIG"), tmp_path, kafka_bootstrap)
    try:
        expected = {i: (f"ITEM{i}", amount * 2) for i, _, amount in inputs if amount > 10}
        records = read_all(kafka_settings, sink, len(expected))
        got = {struct.unpack(">i", k or b"")[0]: json.loads(v or b"") for k, v, _ in records}
        assert got == {i: {"ITEM": item, "TWICE": twice, "AT": 1000 + i}
                       for i, (item, twice) in expected.items()}
        assert len(records) == len(expected), "each matching record once"
        sources = {h["metastore.source"].decode() for _, _, h in records}
        assert sources == {f"{source}/{i % 2}/{i // 2}" for i in expected}
    finally:
        streaming.stop()


def test_ctas_count_by_key_upserts_latest_counts(
        spark: Any, kafka_bootstrap: str, kafka_settings: KafkaSettings,
        topic_factory: Callable[..., str], producer_factory: Callable[..., Producer],
        tmp_path: Path) -> None:
    source, sink = topic_factory(), topic_factory()
    image = catalog(f"""
        CREATE STREAM CLICKS (ID INT KEY, PAGE STRING, MS BIGINT)
            WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON');
        CREATE TABLE PER_PAGE WITH (KAFKA_TOPIC='{sink}', KEY_FORMAT='KAFKA') AS
            SELECT PAGE, COUNT(*) AS VIEWS, SUM(MS) AS TOTAL, MAX(MS) AS LONGEST,
                   LATEST_BY_OFFSET(ID) AS LAST_ID
            FROM CLICKS GROUP BY PAGE EMIT CHANGES;""")
    producer = producer_factory()
    pages = ["home", "cart", "home", "pay", "home", "cart"]
    for i, page in enumerate(pages):
        producer.produce(source, key=int_key(i), value=json.dumps({"PAGE": page, "MS": i * 10}))
    producer.flush(10)
    streaming = run(spark, image, query_id(image, "PER_PAGE"), tmp_path, kafka_bootstrap)
    try:
        records = read_all(kafka_settings, sink, 3)
        latest = {(k or b"").decode(): json.loads(v or b"") for k, v, _ in records}
        assert latest == {"home": {"VIEWS": 3, "TOTAL": 60, "LONGEST": 40, "LAST_ID": 4},
                          "cart": {"VIEWS": 2, "TOTAL": 60, "LONGEST": 50, "LAST_ID": 5},
                          "pay": {"VIEWS": 1, "TOTAL": 30, "LONGEST": 30, "LAST_ID": 3}}
        producer.produce(source, key=int_key(9), value=json.dumps({"PAGE": "pay", "MS": 1}))
        producer.flush(10)
        more = read_all(kafka_settings, sink, len(records) + 1)
        assert more[-1] == (b"pay", json.dumps(
            {"VIEWS": 2, "TOTAL": 31, "LONGEST": 30, "LAST_ID": 9}).replace(" ", "").encode(), {})
    finally:
        streaming.stop()


def test_stream_table_join_sees_table_rows_written_after_the_start(
        spark: Any, kafka_bootstrap: str, kafka_settings: KafkaSettings,
        topic_factory: Callable[..., str], producer_factory: Callable[..., Producer],
        tmp_path: Path) -> None:
    views, users, sink = topic_factory(), topic_factory(), topic_factory()
    image = catalog(f"""
        CREATE STREAM VIEWS (USER_ID STRING KEY, PAGE STRING)
            WITH (KAFKA_TOPIC='{views}', VALUE_FORMAT='JSON');
        CREATE TABLE USERS (ID STRING PRIMARY KEY, NAME STRING, REGION STRING)
            WITH (KAFKA_TOPIC='{users}', VALUE_FORMAT='JSON');
        CREATE STREAM ENRICHED WITH (KAFKA_TOPIC='{sink}', VALUE_FORMAT='DELIMITED') AS
            SELECT V.USER_ID AS USER_ID, PAGE, NAME, REGION
            FROM VIEWS V LEFT JOIN USERS U ON V.USER_ID = U.ID EMIT CHANGES;""")
    producer = producer_factory()
    producer.produce(users, key=b"u1", value=json.dumps({"NAME": "alice", "REGION": "eu"}))
    producer.produce(users, key=b"u2", value=json.dumps({"NAME": "bob", "REGION": "us"}))
    producer.flush(10)
    for user, page in (("u1", "a"), ("u2", "b"), ("u3", "c")):
        producer.produce(views, key=user.encode(), value=json.dumps({"PAGE": page}))
    producer.flush(10)
    streaming = run(spark, image, query_id(image, "ENRICHED"), tmp_path, kafka_bootstrap)
    try:
        first = read_all(kafka_settings, sink, 3)
        assert sorted((k, v) for k, v, _ in first) == [
            (b"u1", b"a,alice,eu"), (b"u2", b"b,bob,us"), (b"u3", b"c,,")]
        producer.produce(users, key=b"u3", value=json.dumps({"NAME": "carol", "REGION": "ap"}))
        producer.produce(users, key=b"u1", value=json.dumps({"NAME": "alicia", "REGION": "eu"}))
        producer.produce(users, key=b"u2", value=None)
        producer.flush(10)
        time.sleep(1)
        for user, page in (("u1", "d"), ("u2", "e"), ("u3", "f")):
            producer.produce(views, key=user.encode(), value=json.dumps({"PAGE": page}))
        producer.flush(10)
        records = read_all(kafka_settings, sink, 6)
        assert sorted((k, v) for k, v, _ in records[3:]) == [
            (b"u1", b"d,alicia,eu"), (b"u2", b"e,,"), (b"u3", b"f,carol,ap")]
    finally:
        streaming.stop()


def test_stream_table_join_keeps_the_table_side_in_its_checkpoint(
        spark: Any, kafka_bootstrap: str, kafka_settings: KafkaSettings,
        topic_factory: Callable[..., str], producer_factory: Callable[..., Producer],
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The table's rows are the join's keyed state, not a re-read of its topic: after the
    table topic's records are deleted, the query restarted on its checkpoint still joins
    them; a table row written before a stream record joins it, one written after does not, and
    of two updates of a row the later offset wins. The first run writes its RocksDB state as
    snapshots (as a release before changelog checkpointing did), the restart as changelogs,
    from that state."""
    views, users, sink = topic_factory(), topic_factory(), topic_factory()
    image = catalog(f"""
        CREATE STREAM VIEWS (USER_ID STRING KEY, PAGE STRING)
            WITH (KAFKA_TOPIC='{views}', VALUE_FORMAT='JSON');
        CREATE TABLE USERS (ID STRING PRIMARY KEY, NAME STRING)
            WITH (KAFKA_TOPIC='{users}', VALUE_FORMAT='JSON');
        CREATE STREAM ENRICHED WITH (KAFKA_TOPIC='{sink}', VALUE_FORMAT='DELIMITED') AS
            SELECT V.USER_ID AS USER_ID, PAGE, NAME
            FROM VIEWS V JOIN USERS U ON V.USER_ID = U.ID EMIT CHANGES;""")
    plan = compile_query(image.queries[query_id(image, "ENRICHED")], image)
    assert plan.table_state
    assert not any(step.topic == users and not step.streaming for step in plan.steps), \
        "the table's topic is not read in batch"
    earlier = compile_query(image.queries[query_id(image, "ENRICHED")], image, table_state=False)
    assert any(step.topic == users and not step.streaming for step in earlier.steps)
    producer = producer_factory()
    producer.produce(users, key=b"u1", value=json.dumps({"NAME": "alice"}), timestamp=1000)
    producer.produce(views, key=b"u1", value=json.dumps({"PAGE": "a"}), timestamp=2000)
    producer.produce(views, key=b"u2", value=json.dumps({"PAGE": "b"}), timestamp=2000)
    producer.produce(users, key=b"u2", value=json.dumps({"NAME": "bob"}), timestamp=3000)
    # the later offset wins, whatever its time, as in Kafka Streams' table
    producer.produce(users, key=b"u4", value=json.dumps({"NAME": "old"}), timestamp=3000)
    producer.produce(users, key=b"u4", value=json.dumps({"NAME": "new"}), timestamp=2500)
    producer.produce(views, key=b"u4", value=json.dumps({"PAGE": "e"}), timestamp=4000)
    producer.flush(10)
    options = {"kafka.bootstrap.servers": kafka_bootstrap}
    with monkeypatch.context() as before:
        before.setattr(job, "CHANGELOG_CHECKPOINTING", "spark.sql.metastore.test.unset")
        run_available_now(spark, plan, tmp_path / "q", options)
    assert not list((tmp_path / "q").rglob("*.changelog")), "snapshots only"
    first = read_all(kafka_settings, sink, 2)
    assert sorted((k, v) for k, v, _ in first) == [(b"u1", b"a,alice"), (b"u4", b"e,new")]
    delete_all_records(kafka_settings, users)
    producer.produce(views, key=b"u1", value=json.dumps({"PAGE": "c"}), timestamp=4000)
    producer.produce(views, key=b"u2", value=json.dumps({"PAGE": "d"}), timestamp=4000)
    producer.flush(10)
    run_available_now(spark, plan, tmp_path / "q", options)
    assert list((tmp_path / "q").rglob("*.changelog")), "the restart commits changelogs"
    records = read_all(kafka_settings, sink, len(first) + 2)
    assert sorted((k, v) for k, v, _ in records[len(first):]) == [
        (b"u1", b"c,alice"), (b"u2", b"d,bob")]


def test_table_table_join_keeps_both_tables_in_its_checkpoint(
        spark: Any, kafka_bootstrap: str, kafka_settings: KafkaSettings,
        topic_factory: Callable[..., str], producer_factory: Callable[..., Producer],
        tmp_path: Path) -> None:
    """A primary-key table-table join's sides are keyed state: after both topics' records are
    deleted, the restarted query joins a change of one table with the other's row from its
    checkpoint, and a tombstone on the left side deletes the result row."""
    users, regions, sink = topic_factory(), topic_factory(), topic_factory()
    image = catalog(f"""
        CREATE TABLE USERS (ID STRING PRIMARY KEY, NAME STRING)
            WITH (KAFKA_TOPIC='{users}', VALUE_FORMAT='JSON');
        CREATE TABLE REGIONS (ID STRING PRIMARY KEY, REGION STRING)
            WITH (KAFKA_TOPIC='{regions}', VALUE_FORMAT='JSON');
        CREATE TABLE PLACED WITH (KAFKA_TOPIC='{sink}', VALUE_FORMAT='DELIMITED') AS
            SELECT U.ID AS ID, NAME, REGION FROM USERS U LEFT JOIN REGIONS R ON U.ID = R.ID;""")
    plan = compile_query(image.queries[query_id(image, "PLACED")], image)
    assert plan.table_state and plan.batch is None
    producer = producer_factory()
    producer.produce(users, key=b"u1", value=json.dumps({"NAME": "alice"}), timestamp=1000)
    producer.produce(users, key=b"u2", value=json.dumps({"NAME": "bob"}), timestamp=1000)
    producer.produce(regions, key=b"u1", value=json.dumps({"REGION": "eu"}), timestamp=2000)
    producer.flush(10)
    options = {"kafka.bootstrap.servers": kafka_bootstrap}
    run_available_now(spark, plan, tmp_path / "q", options)
    first = read_all(kafka_settings, sink, 2)
    assert sorted((k, v) for k, v, _ in first) == [(b"u1", b"alice,eu"), (b"u2", b"bob,")]
    delete_all_records(kafka_settings, users, regions)
    producer.produce(users, key=b"u1", value=json.dumps({"NAME": "alicia"}), timestamp=3000)
    producer.produce(regions, key=b"u2", value=json.dumps({"REGION": "us"}), timestamp=3000)
    producer.produce(users, key=b"u3", value=json.dumps({"NAME": "carol"}), timestamp=3000)
    producer.produce(users, key=b"u3", value=None, timestamp=4000)
    producer.flush(10)
    run_available_now(spark, plan, tmp_path / "q", options)
    records = read_all(kafka_settings, sink, len(first) + 3)
    assert sorted((k, v) for k, v, _ in records[len(first):]) == [
        (b"u1", b"alicia,eu"), (b"u2", b"bob,us"), (b"u3", None)]


def test_foreign_key_join_keeps_both_tables_in_its_checkpoint(
        spark: Any, kafka_bootstrap: str, kafka_settings: KafkaSettings,
        topic_factory: Callable[..., str], producer_factory: Callable[..., Producer],
        tmp_path: Path) -> None:
    """A foreign-key join's sides are keyed state: after both topics' records are deleted, the
    restarted query joins a change of a right row with every left row that references it (from
    its checkpoint), a left row that moves to another foreign key with that row, and a left row
    without a foreign key with none (a LEFT join)."""
    orders, products, sink = topic_factory(), topic_factory(), topic_factory()
    image = catalog(f"""
        CREATE TABLE ORDERS (ID STRING PRIMARY KEY, PRODUCT STRING, QTY INT)
            WITH (KAFKA_TOPIC='{orders}', VALUE_FORMAT='JSON');
        CREATE TABLE PRODUCTS (ID STRING PRIMARY KEY, NAME STRING)
            WITH (KAFKA_TOPIC='{products}', VALUE_FORMAT='JSON');
        CREATE TABLE NAMED WITH (KAFKA_TOPIC='{sink}', VALUE_FORMAT='DELIMITED') AS
            SELECT O.ID AS ID, QTY, NAME FROM ORDERS O LEFT JOIN PRODUCTS P ON O.PRODUCT = P.ID;""")
    plan = compile_query(image.queries[query_id(image, "NAMED")], image)
    assert plan.table_state and plan.batch is None
    producer = producer_factory()
    produce_json(producer, products, {"p1": {"NAME": "apple"}, "p2": {"NAME": "pear"}}, 1000)
    produce_json(producer, orders, {"o1": {"PRODUCT": "p1", "QTY": 1},
                                    "o2": {"PRODUCT": "p2", "QTY": 2},
                                    "o3": {"PRODUCT": "p1", "QTY": 3}}, 2000)
    assert producer.flush(10) == 0
    options = {"kafka.bootstrap.servers": kafka_bootstrap}
    run_available_now(spark, plan, tmp_path / "q", options)
    first = read_all(kafka_settings, sink, 3)
    assert sorted((k, v) for k, v, _ in first) == [
        (b"o1", b"1,apple"), (b"o2", b"2,pear"), (b"o3", b"3,apple")]
    delete_all_records(kafka_settings, orders, products)
    producer.produce(products, key=b"p1", value=json.dumps({"NAME": "green apple"}),
                     timestamp=3000)
    producer.produce(orders, key=b"o2", value=json.dumps({"PRODUCT": "p1", "QTY": 5}),
                     timestamp=3000)
    producer.produce(orders, key=b"o4", value=json.dumps({"QTY": 4}), timestamp=3000)
    assert producer.flush(10) == 0
    run_available_now(spark, plan, tmp_path / "q", options)
    records = read_all(kafka_settings, sink, len(first) + 4)
    assert sorted((k, v) for k, v, _ in records[len(first):]) == [
        (b"o1", b"1,green apple"), (b"o2", b"5,green apple"), (b"o3", b"3,green apple"),
        (b"o4", b"4,")]


def test_table_aggregation_keeps_rows_and_groups_in_its_checkpoint(
        spark: Any, kafka_bootstrap: str, kafka_settings: KafkaSettings,
        topic_factory: Callable[..., str], producer_factory: Callable[..., Producer],
        tmp_path: Path) -> None:
    """A table aggregation's rows and groups are keyed state: after the table topic's records
    are deleted, the restarted query still takes a row's old value out of its old group when
    it moves, and a tombstone's old value out of its group; the table is not read in batch.
    Its checkpoint is a Hadoop URI (``file://``): Spark's state and offsets, the table-state
    mark and the batch stage's read of the offset log all go through Hadoop's FileSystem."""
    users, sink = topic_factory(), topic_factory()
    image = catalog(f"""
        CREATE TABLE USERS (ID STRING PRIMARY KEY, REGION STRING, SCORE INT)
            WITH (KAFKA_TOPIC='{users}', VALUE_FORMAT='JSON');
        CREATE TABLE BY_REGION WITH (KAFKA_TOPIC='{sink}', VALUE_FORMAT='DELIMITED') AS
            SELECT REGION, COUNT(*) AS N, SUM(SCORE) AS TOTAL FROM USERS
            WHERE SCORE > 0 GROUP BY REGION;""")
    plan = compile_query(image.queries[query_id(image, "BY_REGION")], image)
    assert plan.table_state
    assert plan.batch is not None and not any(step.topic for step in plan.batch.steps), \
        "the table's topic is not read in batch"
    producer = producer_factory()
    for key, region, score in (("u1", "eu", 1), ("u2", "eu", 2), ("u3", "us", 5),
                               ("u4", "us", -1)):
        producer.produce(users, key=key.encode(), value=json.dumps(
            {"REGION": region, "SCORE": score}), timestamp=1000)
    assert producer.flush(10) == 0
    options = {"kafka.bootstrap.servers": kafka_bootstrap}
    checkpoint = HadoopDir(f"{tmp_path.as_uri()}/q", lambda: spark)
    run_available_now(spark, plan, checkpoint, options)
    assert (tmp_path / "q" / TABLE_STATE_MARK).is_file() and (tmp_path / "q" / "state").is_dir()
    first = read_all(kafka_settings, sink, 2)
    assert sorted((k, v) for k, v, _ in first) == [(b"eu", b"2,3"), (b"us", b"1,5")]
    delete_all_records(kafka_settings, users)
    producer.produce(users, key=b"u1", value=json.dumps({"REGION": "us", "SCORE": 10}),
                     timestamp=2000)
    producer.produce(users, key=b"u3", value=None, timestamp=2000)
    producer.produce(users, key=b"u4", value=json.dumps({"REGION": "us", "SCORE": 7}),
                     timestamp=2000)
    assert producer.flush(10) == 0
    assert checkpoint.holds_table_state()
    run_available_now(spark, plan, checkpoint, options)
    records = read_all(kafka_settings, sink, len(first) + 2)
    assert sorted((k, v) for k, v, _ in records[len(first):]) == [
        (b"eu", b"1,2"), (b"us", b"2,17")]


def test_an_aggregated_foreign_key_join_keeps_joins_and_groups_in_its_checkpoint(
        spark: Any, kafka_bootstrap: str, kafka_settings: KafkaSettings,
        topic_factory: Callable[..., str], producer_factory: Callable[..., Producer],
        tmp_path: Path) -> None:
    """An aggregation of a table-table join aggregates the join's rows as a table: after both
    topics' records are deleted, the restarted query moves every order of a customer who
    changed region out of the old region's group (which keeps a count of 0, as ksqlDB's undo
    leaves it) into the new one's, and takes a deleted order out of its group; neither table
    is read in batch."""
    orders, customers, sink = topic_factory(), topic_factory(), topic_factory()
    image = catalog(f"""
        CREATE TABLE ORDERS (ID STRING PRIMARY KEY, CUSTOMER STRING, AMOUNT INT)
            WITH (KAFKA_TOPIC='{orders}', VALUE_FORMAT='JSON');
        CREATE TABLE CUSTOMERS (ID STRING PRIMARY KEY, REGION STRING)
            WITH (KAFKA_TOPIC='{customers}', VALUE_FORMAT='JSON');
        CREATE TABLE BY_REGION WITH (KAFKA_TOPIC='{sink}', VALUE_FORMAT='DELIMITED') AS
            SELECT C.REGION, COUNT(*) AS N, SUM(O.AMOUNT) AS TOTAL
            FROM ORDERS O JOIN CUSTOMERS C ON O.CUSTOMER = C.ID GROUP BY C.REGION;""")
    plan = compile_query(image.queries[query_id(image, "BY_REGION")], image)
    assert plan.table_state
    assert plan.batch is not None and not any(step.topic for step in plan.batch.steps), \
        "no table is read in batch"
    producer = producer_factory()
    produce_json(producer, customers, {"c1": {"REGION": "east"}, "c2": {"REGION": "west"}}, 1000)
    produce_json(producer, orders, {"o1": {"CUSTOMER": "c1", "AMOUNT": 5},
                                    "o2": {"CUSTOMER": "c2", "AMOUNT": 7},
                                    "o3": {"CUSTOMER": "c1", "AMOUNT": 1}}, 2000)
    assert producer.flush(10) == 0
    options = {"kafka.bootstrap.servers": kafka_bootstrap}
    run_available_now(spark, plan, tmp_path / "q", options)
    first = read_all(kafka_settings, sink, 2)
    assert sorted((k, v) for k, v, _ in first) == [(b"east", b"2,6"), (b"west", b"1,7")]
    delete_all_records(kafka_settings, orders, customers)
    produce_json(producer, customers, {"c1": {"REGION": "west"}}, 3000)
    produce_json(producer, orders, {"o2": None}, 3000)
    assert producer.flush(10) == 0
    run_available_now(spark, plan, tmp_path / "q", options)
    records = read_all(kafka_settings, sink, len(first) + 2)
    assert sorted((k, v) for k, v, _ in records[len(first):]) == [
        (b"east", b"0,0"), (b"west", b"2,6")]


def test_session_windows_keep_sessions_and_stream_time_in_their_checkpoint(
        spark: Any, kafka_bootstrap: str, kafka_settings: KafkaSettings,
        topic_factory: Callable[..., str], producer_factory: Callable[..., Producer],
        tmp_path: Path) -> None:
    """A SESSION aggregation's sessions and stream time are keyed state: after the stream's
    records are deleted, the restarted query merges two sessions that a new record bridges
    (counting the deleted records, and deleting both old sessions' records) and drops a record
    its checkpointed stream time makes late; the stream is not read in batch. A checkpoint
    started before this state keeps replaying the stream."""
    clicks, sink = topic_factory(), topic_factory()
    image = visits(clicks, sink, KEPT_SESSIONS)
    plan = keyed_stream_plan(image, "VISITS", clicks)
    producer = producer_factory()
    for at in (1000, 2000, 15000):
        producer.produce(clicks, key=int_key(1), value=json.dumps({"PAGE": "a"}), timestamp=at)
    assert producer.flush(10) == 0
    options = {"kafka.bootstrap.servers": kafka_bootstrap}
    run_available_now(spark, plan, tmp_path / "q", options)

    def sessions(records: list[Record]) -> list[tuple[tuple[int, int, int], bytes | None]]:
        return sorted((struct.unpack(">iqq", k or b""), v) for k, v, _ in records)

    first = read_all(kafka_settings, sink, 2)
    assert sessions(first) == [((1, 2000, 1000), b"2"), ((1, 15000, 15000), b"1")]
    delete_all_records(kafka_settings, clicks)
    producer.produce(clicks, key=int_key(1), value=json.dumps({"PAGE": "b"}), timestamp=8000)
    producer.produce(clicks, key=int_key(2), value=json.dumps({"PAGE": "c"}), timestamp=1000)
    assert producer.flush(10) == 0
    run_available_now(spark, plan, tmp_path / "q", options)
    records = read_all(kafka_settings, sink, len(first) + 3)
    assert sessions(records[len(first):]) == [
        ((1, 2000, 1000), None), ((1, 15000, 1000), b"4"), ((1, 15000, 15000), None)]


def test_emit_final_keeps_open_windows_in_its_checkpoint(
        spark: Any, kafka_bootstrap: str, kafka_settings: KafkaSettings,
        topic_factory: Callable[..., str], producer_factory: Callable[..., Producer],
        tmp_path: Path) -> None:
    """An EMIT FINAL aggregation's open windows and their records are keyed state: after the
    stream's records are deleted, the restarted query closes the window they are counted in
    when stream time passes its end, writing each key's final count once, and drops a record
    for the closed window as late; the stream is not read in batch. A checkpoint started
    before this state keeps replaying the stream."""
    readings, sink = topic_factory(), topic_factory()
    image = catalog(f"""
        CREATE STREAM READINGS (SENSOR INT KEY, V INT)
            WITH (KAFKA_TOPIC='{readings}', VALUE_FORMAT='JSON');
        CREATE TABLE FINAL_COUNTS WITH (KAFKA_TOPIC='{sink}', VALUE_FORMAT='DELIMITED') AS
            SELECT SENSOR, COUNT(*) AS N FROM READINGS WINDOW TUMBLING (SIZE 10 SECONDS)
            GROUP BY SENSOR EMIT FINAL;""")
    plan = keyed_stream_plan(image, "FINAL_COUNTS", readings)
    producer = producer_factory()
    for sensor, at in ((1, 1000), (1, 2000), (2, 5000)):
        producer.produce(readings, key=int_key(sensor), value=json.dumps({"V": 1}),
                         timestamp=at)
    assert producer.flush(10) == 0
    options = {"kafka.bootstrap.servers": kafka_bootstrap}
    run_available_now(spark, plan, tmp_path / "q", options)
    assert read_all(kafka_settings, sink, 1, timeout=5) == [], "no window has closed"
    delete_all_records(kafka_settings, readings)
    producer.produce(readings, key=int_key(1), value=json.dumps({"V": 1}), timestamp=12000)
    producer.produce(readings, key=int_key(3), value=json.dumps({"V": 1}), timestamp=3000)
    assert producer.flush(10) == 0
    run_available_now(spark, plan, tmp_path / "q", options)
    records = read_all(kafka_settings, sink, 3, timeout=15)
    assert sorted((struct.unpack(">iq", k or b""), v) for k, v, _ in records) == [
        ((1, 0), b"2"), ((2, 0), b"1")]


def test_emit_final_sessions_are_written_as_stream_time_closes_them(
        spark: Any, kafka_bootstrap: str, kafka_settings: KafkaSettings,
        topic_factory: Callable[..., str], producer_factory: Callable[..., Producer],
        tmp_path: Path) -> None:
    """An EMIT FINAL SESSION aggregation's sessions and stream time are keyed state: after the
    stream's records are deleted, the restarted query, record by record as Kafka Streams, counts
    them in the sessions a new record extends; a record of another key closes two sessions
    (stream time less the grace period and the gap passes their ends), each written once; a
    later record still merges a written session into one written at its own close; a record of
    a closed session is dropped as late. The stream is not read in batch, and a checkpoint
    started before this state keeps replaying it."""
    clicks, sink = topic_factory(), topic_factory()
    image = visits(clicks, sink, KEPT_SESSIONS, final=True)
    plan = keyed_stream_plan(image, "VISITS", clicks)
    producer = producer_factory()

    def click(user: int, at: int) -> None:
        producer.produce(clicks, key=int_key(user), value=json.dumps({"PAGE": "a"}),
                         timestamp=at)

    for user, at in ((1, 1000), (1, 2000), (2, 5000)):
        click(user, at)
    assert producer.flush(10) == 0
    options = {"kafka.bootstrap.servers": kafka_bootstrap}
    run_available_now(spark, plan, tmp_path / "q", options)
    assert read_all(kafka_settings, sink, 1, timeout=5) == [], "no session has closed"
    delete_all_records(kafka_settings, clicks)
    # closes at stream time less 11 s: 9 s at the third record, 29 s at the fifth
    for user, at in ((1, 8000), (2, 4000), (3, 20000), (1, 17000), (3, 40000), (2, 4500)):
        click(user, at)
    assert producer.flush(10) == 0
    run_available_now(spark, plan, tmp_path / "q", options)
    records = read_all(kafka_settings, sink, 4, timeout=15)
    assert sorted((struct.unpack(">iqq", k or b""), v) for k, v, _ in records) == [
        ((1, 8000, 1000), b"3"), ((1, 17000, 1000), b"4"), ((2, 5000, 4000), b"2"),
        ((3, 20000, 20000), b"1")]


def test_emit_final_sessions_expire_once_written_and_count_each_record_once(
        spark: Any, kafka_bootstrap: str, kafka_settings: KafkaSettings,
        topic_factory: Callable[..., str], producer_factory: Callable[..., Producer],
        tmp_path: Path) -> None:
    """With the default retention (the gap: EMIT FINAL's grace is 0), a session ending at the
    close stream time reached is neither written nor expired yet, and a record of its time
    in the next micro-batch joins it (one session of two records, not two); written sessions
    expire with their records, so a later session of the same key counts only its own."""
    clicks, sink = topic_factory(), topic_factory()
    image = visits(clicks, sink, "SESSION (30 SECONDS)", final=True)
    plan = compile_query(image.queries[query_id(image, "VISITS")], image)
    producer = producer_factory()
    options = {"kafka.bootstrap.servers": kafka_bootstrap}
    # closes at stream time less 30 s: 1 s after the first run (user 1's session ends there),
    # 2 s and then 171 s in the second, 271 s in the third (a Kafka timestamp of 0 is "now")
    for run in (((1, 1000), (2, 31_000)), ((1, 1000), (2, 32_000), (1, 201_000)),
                ((1, 201_000), (3, 301_000))):
        for user, at in run:
            producer.produce(clicks, key=int_key(user), value=json.dumps({"PAGE": "a"}),
                             timestamp=at)
        assert producer.flush(10) == 0
        run_available_now(spark, plan, tmp_path / "q", options)
    written = read_all(kafka_settings, sink, 4, timeout=15)
    assert sorted((struct.unpack(">iqq", k or b""), v) for k, v, _ in written) == [
        ((1, 1000, 1000), b"2"), ((1, 201_000, 201_000), b"2"), ((2, 32_000, 31_000), b"2")]


def test_tables_joined_before_a_stream_stream_join_are_keyed_state(
        spark: Any, kafka_bootstrap: str, kafka_settings: KafkaSettings,
        topic_factory: Callable[..., str], producer_factory: Callable[..., Producer],
        tmp_path: Path) -> None:
    """``s1 LEFT JOIN t ... JOIN s2 WITHIN ...``: the table is keyed state over the first
    stream's records, whose joined records then join the other stream: after the table's
    records are deleted, the restarted query still joins a new record with the table's row, and
    the later join's ON reads the table's column; no topic is read in batch, and a checkpoint
    started before that state keeps the plan that reads every version of the table's rows."""
    views, users, clicks, sink = topic_factory(), topic_factory(), topic_factory(), \
        topic_factory()
    image = catalog(f"""
        CREATE STREAM VIEWS (ID STRING KEY, USER_ID STRING)
            WITH (KAFKA_TOPIC='{views}', VALUE_FORMAT='JSON');
        CREATE TABLE USERS (ID STRING PRIMARY KEY, NAME STRING, TEAM STRING)
            WITH (KAFKA_TOPIC='{users}', VALUE_FORMAT='JSON');
        CREATE STREAM CLICKS (ID STRING KEY, TEAM STRING, BUTTON STRING)
            WITH (KAFKA_TOPIC='{clicks}', VALUE_FORMAT='JSON');
        CREATE STREAM VIEW_CLICKS WITH (KAFKA_TOPIC='{sink}', VALUE_FORMAT='DELIMITED') AS
            SELECT C.TEAM AS TEAM, V.ID AS VIEW_ID, U.NAME AS NAME, C.BUTTON AS BUTTON
            FROM VIEWS V LEFT JOIN USERS U ON V.USER_ID = U.ID
            JOIN CLICKS C WITHIN 1 MINUTE ON U.TEAM = C.TEAM;""")
    query = image.queries[query_id(image, "VIEW_CLICKS")]
    plan = compile_query(query, image)
    assert plan.table_state and plan.checked is None
    assert not any(not step.streaming and step.topic for step in plan.steps), \
        "no topic is read in batch"
    versioned = compile_query(query, image, table_state=False)
    assert any(not step.streaming and step.topic == users for step in versioned.steps)
    producer = producer_factory()
    produce_json(producer, users, {"u1": {"NAME": "ann", "TEAM": "red"}}, 500)
    assert producer.flush(10) == 0
    produce_json(producer, views, {"k": {"USER_ID": "u1"}, "j": {"USER_ID": "u2"}}, 1000)
    assert producer.flush(10) == 0
    produce_json(producer, clicks, {"c1": {"TEAM": "red", "BUTTON": "buy"}}, 1500)
    assert producer.flush(10) == 0
    options = {"kafka.bootstrap.servers": kafka_bootstrap}
    run_available_now(spark, plan, tmp_path / "q", options)
    first = read_all(kafka_settings, sink, 1)
    assert [(k, v) for k, v, _ in first] == [(b"red", b"k,ann,buy")], \
        "j has no user, so no team"
    delete_all_records(kafka_settings, users)
    produce_json(producer, views, {"m": {"USER_ID": "u1"}}, 200_000)
    assert producer.flush(10) == 0
    produce_json(producer, clicks, {"c2": {"TEAM": "red", "BUTTON": "cart"}}, 200_100)
    assert producer.flush(10) == 0
    run_available_now(spark, plan, tmp_path / "q", options)
    records = read_all(kafka_settings, sink, len(first) + 1, timeout=20)
    assert [(k, v) for k, v, _ in records[len(first):]] == [(b"red", b"m,ann,cart")]


def test_left_join_without_grace_keeps_the_other_streams_times_in_its_checkpoint(
        spark: Any, kafka_bootstrap: str, kafka_settings: KafkaSettings,
        topic_factory: Callable[..., str], producer_factory: Callable[..., Producer],
        tmp_path: Path) -> None:
    """A LEFT JOIN of streams without GRACE PERIOD writes a left record no earlier right record
    matches at once, NULL-padded; which right records came is keyed state: after both topics'
    records are deleted, the restarted query still finds a left record's earlier match (and
    writes the pair, from Spark's join state), and the other stream's topic is not read."""
    views, clicks, sink = topic_factory(), topic_factory(), topic_factory()
    image = catalog(f"""
        CREATE STREAM VIEWS (ID STRING KEY, PAGE STRING)
            WITH (KAFKA_TOPIC='{views}', VALUE_FORMAT='JSON');
        CREATE STREAM CLICKS (ID STRING KEY, BUTTON STRING)
            WITH (KAFKA_TOPIC='{clicks}', VALUE_FORMAT='JSON');
        CREATE STREAM VIEW_CLICKS WITH (KAFKA_TOPIC='{sink}', VALUE_FORMAT='DELIMITED') AS
            SELECT V.ID AS ID, PAGE, BUTTON FROM VIEWS V
            LEFT JOIN CLICKS C WITHIN 1 MINUTE ON V.ID = C.ID;""")
    query = image.queries[query_id(image, "VIEW_CLICKS")]
    plan = compile_query(query, image)
    assert plan.stream_state
    assert not any(not step.streaming and step.topic for step in plan.steps), \
        "no topic is read in batch"
    producer = producer_factory()
    produce_json(producer, clicks, {"k": {"BUTTON": "buy"}}, 1000)
    assert producer.flush(10) == 0
    produce_json(producer, views, {"k": {"PAGE": "home"}, "j": {"PAGE": "faq"}}, 1500)
    assert producer.flush(10) == 0
    options = {"kafka.bootstrap.servers": kafka_bootstrap}
    run_available_now(spark, plan, tmp_path / "q", options)
    first = read_all(kafka_settings, sink, 2)
    assert sorted((k, v) for k, v, _ in first) == [(b"j", b"faq,"), (b"k", b"home,buy")]
    delete_all_records(kafka_settings, views, clicks)
    produce_json(producer, views, {"k": {"PAGE": "cart"}}, 1800)
    assert producer.flush(10) == 0
    run_available_now(spark, plan, tmp_path / "q", options)
    records = read_all(kafka_settings, sink, len(first) + 2, timeout=20)
    assert [(k, v) for k, v, _ in records[len(first):]] == [(b"k", b"cart,buy")]


@pytest.mark.parametrize("as_uri", [False, True], ids=["directory", "hadoop-uri"])
def test_a_checkpoint_that_replayed_its_sources_keeps_that_plan(
        spark: Any, tmp_path: Path, as_uri: bool) -> None:
    root = checkpoint_root(tmp_path.as_uri() if as_uri else tmp_path, lambda: spark)
    assert isinstance(root, HadoopRoot) == as_uri and root.location.startswith("file:/")
    assert root.query("new").holds_table_state()
    (tmp_path / "old" / "offsets").mkdir(parents=True)
    (tmp_path / "old" / "offsets" / "0").write_text("v1\n{}\n{\"t\":{\"0\":5}}\n")
    assert not root.query("old").holds_table_state()
    (tmp_path / "old" / TABLE_STATE_MARK).touch()
    assert root.query("old").holds_table_state()
    assert job.micro_batch_ends(root.query("old"), 0) == {"t": {"0": 5}}
    root.query("fresh").prepare(table_state=True)
    assert (tmp_path / "fresh" / TABLE_STATE_MARK).is_file()
    assert not (tmp_path / "fresh" / STREAM_STATE_MARK).exists()
    assert root.query("new").holds_stream_state() and not root.query("old").holds_stream_state()
    root.query("old").prepare(table_state=False, stream_state=True)
    assert (tmp_path / "old" / STREAM_STATE_MARK).is_file()
    assert root.query("old").holds_stream_state()
    assert root.query("new").holds_windowed_partitioning()
    assert not root.query("old").holds_windowed_partitioning()  # keeps Kafka's partitioner
    root.query("fresh").prepare(table_state=False, windowed_partitioning=True)
    assert (tmp_path / "fresh" / WINDOWED_PARTITIONING_MARK).is_file()
    assert root.query_ids() == ["fresh", "old"]
    root.query("old").delete()
    assert root.query_ids() == ["fresh"] and not (tmp_path / "old").exists()
    assert checkpoint_root(tmp_path / "absent", lambda: spark).query_ids() == []
    assert root.scoped("svc").query("q").location == f"{root.location}/svc/q"


def test_tumbling_window_count_writes_ksqldb_windowed_keys(
        spark: Any, kafka_bootstrap: str, kafka_settings: KafkaSettings,
        topic_factory: Callable[..., str], producer_factory: Callable[..., Producer],
        tmp_path: Path) -> None:
    source, sink = topic_factory(), topic_factory()
    image = catalog(f"""
        CREATE STREAM READINGS (SENSOR INT KEY, V INT, TS BIGINT)
            WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON', TIMESTAMP='TS');
        CREATE TABLE PER_MINUTE WITH (KAFKA_TOPIC='{sink}') AS
            SELECT SENSOR, COUNT(*) AS N, SUM(V) AS TOTAL, WINDOWSTART AS WS
            FROM READINGS WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY SENSOR EMIT CHANGES;""")
    producer = producer_factory()
    for sensor, value, ts in ((1, 5, 1_000), (1, 6, 59_000), (1, 7, 60_000), (2, 1, 61_000)):
        producer.produce(source, key=int_key(sensor), value=json.dumps({"V": value, "TS": ts}))
    producer.flush(10)
    streaming = run(spark, image, query_id(image, "PER_MINUTE"), tmp_path, kafka_bootstrap)
    try:
        records = read_all(kafka_settings, sink, 3)
        got = {struct.unpack(">iq", k or b""): json.loads(v or b"") for k, v, _ in records}
        assert got == {(1, 0): {"N": 2, "TOTAL": 11, "WS": 0},
                       (1, 60_000): {"N": 1, "TOTAL": 7, "WS": 60_000},
                       (2, 60_000): {"N": 1, "TOTAL": 1, "WS": 60_000}}
    finally:
        streaming.stop()
