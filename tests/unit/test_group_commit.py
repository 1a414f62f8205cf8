"""The write queue of group commit: who writes which requests together, and when a request
leaves unwritten. Pure: the batches are written by a recording function, not Kafka."""

from __future__ import annotations

import threading
import time

import pytest

from metastore.log.exceptions import NotWrittenError
from metastore.log.group_commit import Queued, WriteQueue
from metastore.log.writer import KafkaTopicFacts
from metastore.server.settings import SettingsError, server_settings
from tests.support.waiting import eventually


def queued(request_id: str, timeout: float = 10.0) -> Queued:
    return Queued((), request_id, time.monotonic() + timeout)


class Recorder:
    """Writes a batch by answering each request with its batch's number; the first batch
    waits until released, so that others queue behind it."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.release = threading.Event()

    def __call__(self, batch: list[Queued]) -> None:
        self.batches.append([item.request_id for item in batch])
        if len(self.batches) == 1:
            assert self.release.wait(10)
        for item in batch:
            item.answer([{"batch": len(self.batches)}])


def submit_in_thread(queue: WriteQueue, item: Queued, write: Recorder,
                     outcomes: dict[str, object]) -> threading.Thread:
    def run() -> None:
        try:
            outcomes[item.request_id] = queue.run(item, write)
        except NotWrittenError as error:
            outcomes[item.request_id] = error

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def wait_queued(queue: WriteQueue, count: int) -> None:
    eventually(lambda: queue.waiting >= count, 10,
               lambda: f"{count} queued, only {queue.waiting} are", interval=0.005)


def test_a_request_alone_is_written_at_once_in_a_batch_of_its_own() -> None:
    queue, write = WriteQueue(), Recorder()
    write.release.set()
    assert queue.run(queued("a"), write) == [{"batch": 1}]
    assert write.batches == [["a"]]


def test_requests_queued_behind_a_write_are_written_together_oldest_first_up_to_the_bound(
        ) -> None:
    queue, write, outcomes = WriteQueue(max_batch=3), Recorder(), {}
    threads = [submit_in_thread(queue, queued("first"), write, outcomes)]
    while not write.batches:
        time.sleep(0.005)
    for index in range(5):
        threads.append(submit_in_thread(queue, queued(f"r{index}"), write, outcomes))
        wait_queued(queue, index + 1)
    write.release.set()
    for thread in threads:
        thread.join(10)
    assert write.batches == [["first"], ["r0", "r1", "r2"], ["r3", "r4"]]
    assert outcomes["r2"] == [{"batch": 2}] and outcomes["r4"] == [{"batch": 3}]
    assert (queue.stats.batches, queue.stats.largest_batch) == (3, 3)


def test_requests_answered_in_a_batch_return_without_waiting_for_the_next() -> None:
    releases = [threading.Event() for _ in range(3)]
    batches: list[list[str]] = []

    def write(batch: list[Queued]) -> None:
        batches.append([item.request_id for item in batch])
        assert releases[len(batches) - 1].wait(10)
        for item in batch:
            item.answer([])

    queue, outcomes = WriteQueue(), {}
    returned: dict[str, float] = {}

    def send(request_id: str) -> threading.Thread:
        def run() -> None:
            outcomes[request_id] = queue.run(queued(request_id), write)
            returned[request_id] = time.monotonic()

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    threads = [send("first")]
    while len(batches) < 1:
        time.sleep(0.005)
    threads += [send("a"), send("b")]
    wait_queued(queue, 2)
    releases[0].set()
    while len(batches) < 2:
        time.sleep(0.005)
    threads.append(send("later"))
    wait_queued(queue, 1)
    released = time.monotonic()
    releases[1].set()
    while len(batches) < 3:
        time.sleep(0.005)
    time.sleep(0.3)  # the third batch is being written
    assert batches == [["first"], ["a", "b"], ["later"]]
    assert returned.keys() >= {"first", "a", "b"} and returned["b"] - released < 0.3
    releases[2].set()
    for thread in threads:
        thread.join(10)
    assert outcomes.keys() == {"first", "a", "b", "later"}


@pytest.mark.serial  # measures the machine: alone, after the parallel phase
def test_a_request_still_queued_at_its_deadline_leaves_unwritten() -> None:
    queue, write, outcomes = WriteQueue(), Recorder(), {}
    first = submit_in_thread(queue, queued("first"), write, outcomes)
    while not write.batches:
        time.sleep(0.005)
    started = time.monotonic()
    with pytest.raises(NotWrittenError, match="busy with other writes"):
        queue.run(queued("late", timeout=0.3), write)
    assert time.monotonic() - started < 1.0
    write.release.set()
    first.join(10)
    assert write.batches == [["first"]], "the request that left is in no batch"
    assert queue.waiting == 0


def test_two_requests_with_one_id_are_never_in_one_batch() -> None:
    queue, write, outcomes = WriteQueue(), Recorder(), {}
    threads = [submit_in_thread(queue, queued("first"), write, outcomes)]
    while not write.batches:
        time.sleep(0.005)
    for index, request_id in enumerate(["same", "other", "same"]):
        threads.append(submit_in_thread(queue, queued(request_id), write, outcomes))
        wait_queued(queue, index + 1)
    write.release.set()
    for thread in threads:
        thread.join(10)
    assert write.batches == [["first"], ["same", "other"], ["same"]]


def test_a_batch_that_fails_fails_each_of_its_requests_and_the_queue_goes_on() -> None:
    queue = WriteQueue()

    def broken(batch: list[Queued]) -> None:
        raise RuntimeError("the writer broke")

    with pytest.raises(RuntimeError, match="the writer broke"):
        queue.run(queued("a"), broken)
    write = Recorder()
    write.release.set()
    assert queue.run(queued("b"), write) == [{"batch": 1}]


def test_a_writer_that_answers_nothing_leaves_no_request_waiting() -> None:
    queue = WriteQueue()
    with pytest.raises(NotWrittenError, match="ended without its answer"):
        queue.run(queued("a"), lambda batch: None)


def test_the_batch_bound_and_linger_are_node_settings() -> None:
    base = {"bootstrap_servers": "k:9092"}
    writer = server_settings(base).node.writer
    assert (writer.max_batch_requests, writer.batch_linger_ms) == (64, 0.0)
    writer = server_settings({**base, "write_batch_max_requests": "8",
                              "write_batch_linger_ms": 2}).node.writer
    assert (writer.max_batch_requests, writer.batch_linger_ms) == (8, 2.0)
    assert server_settings({**base, "writer_mode": "per-statement"}).node.writer \
        .max_batch_requests == 1, "ksqlDB's mode writes each request on its own"
    for name, value in (("write_batch_max_requests", 0), ("write_batch_max_requests", 5000),
                        ("write_batch_linger_ms", -1), ("write_batch_max_requests", "x")):
        with pytest.raises(SettingsError, match=name):
            server_settings({**base, name: value})
    with pytest.raises(SettingsError, match="transaction of its own"):
        server_settings({**base, "writer_mode": "per-statement", "write_batch_max_requests": 8})


def test_the_advertised_url_is_what_other_nodes_reach() -> None:
    base = {"bootstrap_servers": "k:9092"}
    assert server_settings({**base, "listen": "10.0.0.5:8089"}).url == "http://10.0.0.5:8089"
    assert server_settings({**base, "listen": "[::1]:8089"}).url == "http://[::1]:8089"
    assert server_settings({**base, "advertised_url": "https://node-1.example:443/"}).url \
        == "https://node-1.example:443"
    for bad in ("node-1:8088", "http://", "http://h:99999", "http://h:1/path", "ftp://h:1",
                "https://node-1.example", "http://user:secret@h:1"):
        with pytest.raises(SettingsError, match="advertised_url"):
            server_settings({**base, "advertised_url": bad})


def test_one_attempt_asks_kafka_about_a_topic_once() -> None:
    asked: list[str] = []

    class Described:
        partitions = 3

    class CountingAdmin:
        def describe(self, topic: str, timeout: float | None = None) -> Described | None:
            asked.append(topic)
            return Described() if topic == "orders" else None

        def broker_count(self, timeout: float | None = None) -> int:
            asked.append("brokers")
            return 1

    facts = KafkaTopicFacts(CountingAdmin(), max_remembered=2)  # type: ignore[arg-type]
    assert [facts.partitions(t) for t in ("orders", "orders", "gone", "gone")] == [3, 3, None,
                                                                                   None]
    assert [facts.broker_count(), facts.broker_count()] == [1, 1]
    assert asked == ["orders", "gone", "brokers"]
    facts.partitions("third")
    facts.partitions("third")
    assert asked[-2:] == ["third", "third"], "past the bound, topics are not remembered"



def test_an_answered_request_returns_at_once_while_another_batch_holds_the_lead() -> None:
    """A waiting request whose answer comes (the writer answers a retried id from the log before
    the rest of its batch, which may be retried for seconds) is woken by it, not by the end of
    the batch that holds the lead."""
    queue, write = WriteQueue(), Recorder()
    outcomes: dict[str, object] = {}
    first = submit_in_thread(queue, queued("first"), write, outcomes)
    while not write.batches:
        time.sleep(0.005)
    waiting = queued("waiting")
    returned: list[float] = []

    def run() -> None:
        outcomes["waiting"] = queue.run(waiting, write)
        returned.append(time.monotonic())

    thread = threading.Thread(target=run)
    thread.start()
    wait_queued(queue, 1)
    answered_at = time.monotonic()
    waiting.answer([{"answered": "early"}])
    thread.join(5)
    assert returned and returned[0] - answered_at < 1.0, "the answer did not wake its request"
    assert outcomes["waiting"] == [{"answered": "early"}]
    write.release.set()
    first.join(10)
    assert outcomes["first"] == [{"batch": 1}]


def test_the_topics_a_batch_names_are_asked_about_ahead() -> None:
    from metastore.log.writer import MAX_PREFETCHED_TOPICS, named_topics
    from metastore.sql.parser import parse

    statements = parse(
        "CREATE STREAM A (X INT) WITH (kafka_topic=' a ', value_format='JSON');"
        "CREATE TABLE T WITH (KAFKA_TOPIC='t', FORMAT='JSON') AS SELECT X, COUNT(*) FROM A "
        "GROUP BY X;"
        "CREATE STREAM R (X INT) WITH (KAFKA_TOPIC='_metastore-x-command-log', FORMAT='JSON');"
        "CREATE STREAM BAD (X INT) WITH (KAFKA_TOPIC='no spaces', FORMAT='JSON');"
        "CREATE STREAM AGAIN (X INT) WITH (KAFKA_TOPIC='a', FORMAT='JSON');"
        "DROP STREAM A;")
    assert named_topics(statements) == ["a", "t"], "reserved and illegal names are not asked"
    many = parse("".join(f"CREATE STREAM S{i} (X INT) WITH (KAFKA_TOPIC='t{i}', FORMAT='JSON');"
                         for i in range(40)))
    assert len(named_topics(many)) == MAX_PREFETCHED_TOPICS
