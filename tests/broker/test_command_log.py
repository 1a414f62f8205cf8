"""The command log and the single-writer protocol against the real broker."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from metastore.catalog.commands import DropSourceCommand
from metastore.catalog.exceptions import SourceExistsError
from metastore.core.faults import Faults, Flushable
from metastore.kafka.admin import Admin
from metastore.kafka.consumer import EndOffsetProbe, Record
from metastore.kafka.producer import TransactionalProducer
from metastore.log.exceptions import CommandTopicError, NotReadyError, NotWrittenError
from metastore.log.reader import NodeState
from metastore.log.record import CommandRecord
from metastore.log.topic import CommandTopicSpec, command_topic_name, ensure_command_topic
from metastore.log.writer import WriterOptions
from metastore.server.node import Node
from metastore.spark.exceptions import SparkUnavailableError
from metastore.sql.statements import SourceKind
from tests.support.kafka import unique
from tests.support.waiting import eventually

NodeFactory = Callable[..., Node]


def create_stream(name: str, topic: str) -> str:
    return (f"CREATE STREAM {name} (ID INT KEY, V STRING) "
            f"WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', PARTITIONS=1);")


def usurp(node: Node) -> None:
    """Fence ``node``'s writer: initialise another producer with its transactional id."""
    usurper = TransactionalProducer(node.settings, node.config.service_id)
    usurper.init()
    usurper.close()


def committed_values(consumer_factory: Callable[..., Consumer], topic: str) -> list[dict]:  # type: ignore[type-arg]
    consumer = consumer_factory(topic, enable_partition_eof=True)
    values = []
    while True:
        messages = consumer.consume(100, 2.0)
        if not messages:
            break
        done = False
        for message in messages:
            if message.error() is not None:
                done = True
                continue
            values.append(json.loads(message.value()))
        if done:
            break
    return values


def test_statement_is_written_applied_and_answered(node_factory: NodeFactory) -> None:
    node = node_factory()
    topic = unique("pv")
    [entity] = node.execute(create_stream("PAGEVIEWS", topic))
    assert entity["@type"] == "currentStatus"
    assert entity["commandId"] == "stream/PAGEVIEWS/create"
    assert entity["commandStatus"]["status"] == "SUCCESS"
    source = node.replica.image.source("PAGEVIEWS")
    assert source is not None and source.topic == topic
    assert node.replica.position > entity["commandSequenceNumber"]
    assert node.admin.describe(topic) is not None, "PARTITIONS creates the topic"
    assert node.admin.topic_config(topic)["cleanup.policy"] == "delete"


def test_a_tables_new_topic_is_compacted(node_factory: NodeFactory) -> None:
    """ksqlDB creates a table's topic compacted, so it holds each key's newest row, and a
    windowed table's compacted and deleting windows past its retention."""
    node = node_factory()
    topic, windowed = unique("users"), unique("counts")
    node.execute(f"CREATE TABLE USERS (ID INT PRIMARY KEY, NAME STRING) WITH (KAFKA_TOPIC="
                 f"'{topic}', VALUE_FORMAT='JSON', PARTITIONS=1);"
                 f"CREATE STREAM CLICKS (ID INT KEY, URL STRING) WITH (KAFKA_TOPIC="
                 f"'{unique('clicks')}', VALUE_FORMAT='JSON', PARTITIONS=1);"
                 f"CREATE TABLE COUNTS WITH (KAFKA_TOPIC='{windowed}') AS SELECT URL, COUNT(*) "
                 "AS N FROM CLICKS WINDOW TUMBLING (SIZE 1 MINUTE, RETENTION 2 HOURS) "
                 "GROUP BY URL;")
    assert node.admin.topic_config(topic)["cleanup.policy"] == "compact"
    config = node.admin.topic_config(windowed)
    assert config["cleanup.policy"] == "compact,delete"
    assert config["retention.ms"] == str(2 * 3600 * 1000)


def test_two_nodes_racing_for_one_name_exactly_one_wins(
        node_factory: NodeFactory, consumer_factory: Callable[..., Consumer]) -> None:
    first = node_factory(node_id="a")
    second = node_factory(service_id=first.config.service_id, node_id="b")
    topic = unique("race")
    results: dict[str, object] = {}
    barrier = threading.Barrier(2)

    def submit(node: Node) -> None:
        barrier.wait()
        try:
            results[node.config.node_id] = node.execute(create_stream("RACED", topic))
        except SourceExistsError as error:
            results[node.config.node_id] = error

    threads = [threading.Thread(target=submit, args=(n,)) for n in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    errors = [r for r in results.values() if isinstance(r, SourceExistsError)]
    successes = [r for r in results.values() if isinstance(r, list)]
    assert len(errors) == 1 and len(successes) == 1, results
    assert "A stream with the same name already exists" in str(errors[0])
    records = committed_values(consumer_factory, first.config.topic)
    assert [r["commandId"] for r in records] == ["stream/RACED/create"]
    assert first.replica.wait_for_position(second.replica.position, 10)
    assert first.replica.image.fingerprint == second.replica.image.fingerprint


def test_fenced_between_produce_and_commit_retries_transparently(
        node_factory: NodeFactory, consumer_factory: Callable[..., Consumer]) -> None:
    fenced_once: list[bool] = []

    def fence(_producer: Flushable) -> None:
        if not fenced_once:
            fenced_once.append(True)
            other.execute(create_stream("FROM_OTHER", unique("o")))  # init_transactions fences us

    node = node_factory(faults=Faults(before_commit=fence))
    other = node_factory(service_id=node.config.service_id, node_id="other")
    assert node.writer is not None and other.writer is not None
    [entity] = node.execute(create_stream("FROM_NODE", unique("n")))
    assert entity["commandStatus"]["status"] == "SUCCESS"
    assert node.writer.stats.fenced_retries >= 1
    ids = [r["commandId"] for r in committed_values(consumer_factory, node.config.topic)]
    assert ids == ["stream/FROM_OTHER/create", "stream/FROM_NODE/create"]


def test_writer_fenced_on_every_attempt_reports_not_written(
        node_factory: NodeFactory, consumer_factory: Callable[..., Consumer]) -> None:
    node = node_factory(writer=WriterOptions(request_timeout=3.0),
                        faults=Faults(before_commit=lambda _producer: usurp(node)))
    with pytest.raises(NotWrittenError, match="NOT written"):
        node.execute(create_stream("NEVER", unique("never")))
    assert committed_values(consumer_factory, node.config.topic) == []
    assert node.replica.image.source("NEVER") is None


def test_retry_with_the_same_request_id_is_applied_once(
        node_factory: NodeFactory, consumer_factory: Callable[..., Consumer]) -> None:
    node = node_factory()
    statement = create_stream("ONCE", unique("once"))
    [first] = node.execute(statement, request_id="req-1")
    [again] = node.execute(statement, request_id="req-1")
    assert again["commandSequenceNumber"] == first["commandSequenceNumber"]
    assert len(committed_values(consumer_factory, node.config.topic)) == 1


def test_reads_in_a_request_that_writes_answer_as_they_do_alone(node_factory: NodeFactory) -> None:
    """EXPLAIN, SHOW QUERIES EXTENDED, SHOW TOPICS and SHOW PROPERTIES next to a write get the
    entities they get in a request of their own, on the catalog as the request's earlier
    statements left it; a retry answers them again where they still apply."""
    node = node_factory()
    r1, r5 = unique("r1"), unique("r5")
    mine = {r1, r5}
    node.execute(create_stream("R1", r1) + "CREATE STREAM R2 AS SELECT * FROM R1;"
                 + create_stream("R5", r5))
    [query_id] = node.replica.image.queries
    reads = (f"EXPLAIN {query_id}; EXPLAIN CREATE STREAM R3 AS SELECT * FROM R1; "
             "SHOW QUERIES EXTENDED; SHOW TOPICS; SET 'auto.offset.reset'='earliest'; "
             "SHOW PROPERTIES; DESCRIBE R5;")

    def own_topics(listing: dict[str, Any]) -> set[str]:
        """The test's topics among the shared broker's (other tests make and delete theirs)."""
        return {t["name"] for t in listing["topics"]} & mine

    answers: list[list[dict[str, Any]]] = []  # a new topic reaches every broker's metadata soon
    alone = eventually(lambda: answers.append(node.execute(reads)) or (
        answers[-1] if own_topics(answers[-1][3]) == mine else None), 10,
        lambda: f"SHOW TOPICS to list {mine}")
    kinds = ["queryDescription", "queryDescription", "query_descriptions", "kafka_topics",
             "properties", "sourceDescription"]
    assert [e["@type"] for e in alone] == kinds
    request = reads + create_stream("R4", unique("r4")) + "DROP STREAM R5;"
    mixed = node.execute(request, request_id="mixed-1")
    assert [e["@type"] for e in mixed] == [*kinds, "currentStatus", "currentStatus"]
    explained, would, listing, topics, properties, described = mixed[:6]
    assert explained["queryDescription"]["id"] == query_id
    assert would["queryDescription"]["sinks"] == ["R3"]
    assert [d["id"] for d in listing["queryDescriptions"]] == [query_id]
    assert own_topics(topics) == own_topics(alone[3]) == mine
    assert properties["overwrittenProperties"] == alone[4]["overwrittenProperties"] != []
    assert described["sourceDescription"]["name"] == "R5"

    retried = node.execute(request, request_id="mixed-1")
    assert [e["@type"] for e in retried[:5]] == kinds[:5]
    assert retried[5]["@type"] == "warning_entity", "R5 is gone once the request applied"
    assert [e["commandSequenceNumber"] for e in retried[6:]] == [
        e["commandSequenceNumber"] for e in mixed[6:]]


def test_a_retry_whose_read_cannot_be_answered_again_is_a_warning(
        node_factory: NodeFactory) -> None:
    """A retried request is answered from the log: a read Spark cannot answer this time is a
    warning next to the writes the first attempt committed, not the request's error."""
    node = node_factory()
    node.execute(create_stream("W1", unique("w1")) + "CREATE STREAM W2 AS SELECT * FROM W1;")
    [query_id] = node.replica.image.queries
    request = create_stream("W3", unique("w3")) + f"EXPLAIN {query_id};"
    written, explained = node.execute(request, request_id="late-read")
    assert explained["@type"] == "queryDescription"

    def unavailable(*_args: object) -> dict[str, object]:
        raise SparkUnavailableError("Spark did not answer while planning the query")

    assert node.writer is not None
    node.writer._answer_read = unavailable  # Spark gone before the retry
    again, explained_again = node.execute(request, request_id="late-read")
    assert again["commandSequenceNumber"] == written["commandSequenceNumber"]
    assert explained_again["@type"] == "warning_entity"
    assert "Spark did not answer" in explained_again["message"]


def test_multi_statement_request_is_atomic(
        node_factory: NodeFactory, consumer_factory: Callable[..., Consumer]) -> None:
    node = node_factory()
    script = create_stream("A1", unique("a1")) + create_stream("A1", unique("a2"))
    with pytest.raises(SourceExistsError):
        node.execute(script)
    assert committed_values(consumer_factory, node.config.topic) == []
    entities = node.execute(create_stream("B1", unique("b1")) + create_stream("B2", unique("b2")))
    assert [e["commandSequenceNumber"] for e in entities] == [0, 1]


def test_restarted_reader_rebuilds_the_same_fingerprint(node_factory: NodeFactory,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    node = node_factory()
    reader_gate = threading.Event()
    read_and_apply = node.replica._apply

    def gated_apply(records: list[Record], position: int) -> bool:
        reader_gate.wait(60)  # the reader holds what it fetched until the writes are answered
        return read_and_apply(records, position)

    monkeypatch.setattr(node.replica, "_apply", gated_apply)
    for i in range(5):
        node.execute(create_stream(f"S{i}", unique("s")))
    node.execute("CREATE STREAM DERIVED AS SELECT * FROM S0; DROP STREAM S4;")
    fingerprint = node.replica.image.fingerprint
    assert node.writer is not None and node.writer.stats.applied_here == 6, \
        "the writer applied what it committed, without waiting for the reader"
    reader_gate.set()
    end = node.replica.position + 1  # past the last transaction's commit marker
    eventually(lambda: node.replica.position >= end, 10, "the reader passes what it skipped")
    assert node.replica.records_applied == 7 and node.replica.image.fingerprint == fingerprint
    node.stop()
    restarted = node_factory(service_id=node.config.service_id, node_id="restarted")
    assert restarted.replica.image.fingerprint == fingerprint
    assert restarted.replica.image.offset == node.replica.image.offset


@pytest.mark.parametrize(("value", "kind"), [
    (json.dumps({"version": 99, "command": {}}).encode(), "INCOMPATIBLE"),
    (b"\x00\xffnot json", "CORRUPTED"),
])
def test_bad_record_degrades_the_node_without_applying_later_ones(
        node_factory: NodeFactory, producer_factory: Callable[..., Producer],
        value: bytes, kind: str) -> None:
    node = node_factory()
    node.execute(create_stream("BEFORE", unique("before")))
    probe = EndOffsetProbe(node.settings, node.config.topic)
    bad_offset = probe.end_offset()
    probe.close()
    good_later = CommandRecord(DropSourceCommand(SourceKind.STREAM, "BEFORE"), "DROP STREAM BEFORE;",
                               "later")
    raw = producer_factory()
    raw.produce(node.config.topic, key=b"stream/BAD/create", value=value)
    raw.produce(node.config.topic, key=good_later.encode()[0], value=good_later.encode()[1])
    raw.flush(10)
    observer = node_factory(service_id=node.config.service_id, node_id="observer", ready=False)
    deadline_ok = observer.replica.wait_ready(30)
    assert not deadline_ok and observer.state is NodeState.DEGRADED
    degradation = observer.replica.degradation
    assert degradation is not None and degradation.kind == kind
    assert degradation.offset == bad_offset
    assert observer.replica.image.source("BEFORE") is not None, "the later DROP is not applied"
    with pytest.raises(NotReadyError, match="DEGRADED"):
        observer.execute(create_stream("AFTER", unique("after")))
    assert observer.execute("SHOW STREAMS;")[0]["streams"][0]["name"] == "BEFORE"


def test_a_command_topic_of_the_wrong_shape_is_refused(kafka_admin: Admin) -> None:
    name = command_topic_name(unique("shape"))
    kafka_admin.create(name, partitions=2, config={"retention.ms": "1000"})
    with pytest.raises(CommandTopicError, match="wrong shape") as raised:
        ensure_command_topic(kafka_admin, CommandTopicSpec(name), broker_count=1)
    assert "2 partitions" in str(raised.value) and "retention.ms" in str(raised.value)


def test_alternating_writers_recover_from_being_fenced_while_idle(
        node_factory: NodeFactory, consumer_factory: Callable[..., Consumer]) -> None:
    first = node_factory(node_id="a")
    second = node_factory(service_id=first.config.service_id, node_id="b")
    for index in range(4):
        writer = first if index % 2 == 0 else second
        [entity] = writer.execute(create_stream(f"ALT{index}", unique("alt")))
        assert entity["commandStatus"]["status"] == "SUCCESS"
    assert first.writer is not None and first.writer.stats.fenced_retries >= 1
    ids = [r["commandId"] for r in committed_values(consumer_factory, first.config.topic)]
    assert ids == [f"stream/ALT{i}/create" for i in range(4)]


def librdkafka_clients() -> int:
    """The librdkafka client instances alive in this process (one ``rdk:main`` thread each)."""
    tasks = Path("/proc/self/task").iterdir()
    return sum(_thread_name(task) == "rdk:main" for task in tasks)


def _thread_name(task: Path) -> str:
    try:
        return (task / "comm").read_text().strip()
    except OSError:  # the thread ended meanwhile
        return ""


def test_writers_fencing_each_other_release_every_replaced_producer(
        node_factory: NodeFactory) -> None:
    """Each write by the other node fences this one's producer, which is replaced: the replaced
    client's threads and connections end at once instead of piling up."""
    first = node_factory(node_id="a")
    second = node_factory(service_id=first.config.service_id, node_id="b")
    first.execute(create_stream("WARM0", unique("warm")))
    second.execute(create_stream("WARM1", unique("warm")))
    before = librdkafka_clients()
    for index in range(12):
        writer = first if index % 2 == 0 else second
        writer.execute(create_stream(f"FENCE{index}", unique("fence")))
    assert first.writer is not None and second.writer is not None
    created = first.writer.stats.producers_created + second.writer.stats.producers_created
    assert created >= 14, "each write replaced a fenced producer"
    assert librdkafka_clients() <= before, "a replaced producer's client is still alive"
