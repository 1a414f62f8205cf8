"""A query whose command an earlier planner version wrote (a fixture kept in the repository,
``tests/plans/<version>/count-by-group.record.json``) runs on this release's nodes from that
plan, and a takeover by another node carries its state across: the counts go on from the
checkpoint, and the source topic is not read again (its earlier records are deleted before the
takeover, so a restart from scratch would count only the later ones)."""

from __future__ import annotations

import json
import signal
import struct
import uuid

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from integration.conftest import Cluster
from integration.plans import UPGRADE_SOURCE, upgrade_fixture
from integration.query_cluster import (
    ClusterFactory,
    latest_by_key,
    show_queries,
    wait_owned_by,
    wait_owner,
)
from metastore.kafka.settings import KafkaSettings
from metastore.log.record import decode
from metastore.log.topic import command_topic_name
from tests.support.waiting import eventually

FIRST_PLANNER_VERSION = 1
GROUPS = 4


def _write_fixture(cluster: Cluster, source: str, sink: str) -> None:
    """The fixture's command, on this run's topics, committed to the command log as the release
    that planned it wrote it."""
    text = upgrade_fixture(FIRST_PLANNER_VERSION).read_text(encoding="utf-8")
    record = json.loads(text.replace("plan-src", source).replace("plan-counts", sink))
    value = json.dumps(record, sort_keys=True, separators=(",", ":")).encode()
    key = decode(value).command_id.encode()
    producer = Producer(KafkaSettings(cluster.bootstrap).config(
        transactional_id=f"{cluster.service_id}-earlier-release"))
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(command_topic_name(cluster.service_id), key=key, value=value)
    producer.commit_transaction(30)


def _send(bootstrap: str, topic: str, numbers: range) -> None:
    producer = Producer(KafkaSettings(bootstrap).config())
    for i in numbers:
        producer.produce(topic, key=struct.pack(">i", i), value=json.dumps({"G": i % GROUPS}))
    producer.flush(30)


def _counts(bootstrap: str, topic: str) -> dict[int, int]:
    return {struct.unpack(">i", key)[0]: json.loads(value or b"null")["N"]
            for key, value in latest_by_key(bootstrap, topic).items()}


@pytest.mark.timeout(900)
def test_a_query_planned_by_an_earlier_version_runs_and_is_taken_over_with_its_state(
        cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory()
    cluster.up(2, "--spark-master", "local[1]", "--query-session-timeout-ms", "6000")
    source, sink = f"plan-src-{uuid.uuid4().hex[:6]}", f"plan-counts-{uuid.uuid4().hex[:6]}"
    created = cluster.ksql("node-1", UPGRADE_SOURCE.replace("plan-src", source))
    assert created.status_code == 200, created.text
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(sink, 1, 1)])[sink].result(30)
    _write_fixture(cluster, source, sink)
    query_id = eventually(lambda: next((q for q, seen in show_queries(cluster, "node-1").items()
                                        if seen["sinks"] == ["COUNTS"]), None), 60,
                          "the fixture's query in the catalog", interval=0.5)
    owner = wait_owner(cluster, "node-1", query_id, 240)

    _send(cluster.bootstrap, source, range(20))
    eventually(lambda: _counts(cluster.bootstrap, sink) == dict.fromkeys(range(GROUPS), 5), 120,
               lambda: f"the counts of the first 20 records: {_counts(cluster.bootstrap, sink)}",
               interval=1)
    for deleted in admin.delete_records([TopicPartition(source, 0, 20)]).values():
        deleted.result(30)  # a restart from scratch would count the later records alone

    survivor = "node-2" if owner == "node-1" else "node-1"
    assert cluster.nodes.stop_node(owner, signal.SIGKILL)
    wait_owned_by(cluster, survivor, query_id, 180)
    _send(cluster.bootstrap, source, range(20, 40))
    eventually(lambda: _counts(cluster.bootstrap, sink) == dict.fromkeys(range(GROUPS), 10), 180,
               lambda: f"counts going on from the checkpoint: {_counts(cluster.bootstrap, sink)}",
               interval=1)
    [seen] = [q for q in show_queries(cluster, survivor).values() if q["sinks"] == ["COUNTS"]]
    assert seen["state"] == "RUNNING" and seen["ownerNode"] == survivor
