"""Checkpoints and snapshots against the real broker: restarts replay only the tail, never wrongly."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from integration.bench.common import fill
from metastore.checkpoint.checkpointer import CheckpointPolicy
from metastore.checkpoint.codec import ReplicaState
from metastore.kafka.admin import Admin
from metastore.log.reader import LogReplica, Resume
from metastore.log.topic import command_topic_name
from metastore.server.node import Node
from tests.support.kafka import unique
from tests.support.waiting import eventually

NodeFactory = Callable[..., Node]


def statement(name: str) -> str:
    return (f"CREATE STREAM {name} (ID INT KEY, V STRING) "
            f"WITH (KAFKA_TOPIC='{name.lower()}', VALUE_FORMAT='JSON', PARTITIONS=1);")


def wait_for_checkpoint(node: Node, offset: int, timeout: float = 60) -> None:
    checkpointer = node.checkpointer
    assert checkpointer is not None
    eventually(lambda: (last := checkpointer.status.last_offset) is not None and last >= offset,
               timeout, lambda: f"a checkpoint at {offset}: {checkpointer.status}", interval=0.05)


def test_restart_after_10000_commands_replays_only_the_tail(
        node_factory: NodeFactory, kafka_bootstrap: str, tmp_path: Path) -> None:
    service = unique("svc")
    policy = CheckpointPolicy(every_records=1000, every_seconds=3600)
    fill(kafka_bootstrap, command_topic_name(service), 10_000)  # the replay benchmark's log
    first = node_factory(service, data_dir=tmp_path, checkpoint=policy, snapshots=False)
    wait_for_checkpoint(first, 9_999)  # caught up in one go: the boundary at its end
    for index in range(5):  # a tail, written through the protocol, not checkpointed
        first.execute(statement(f"TAIL{index}"))
    tail_fingerprint = first.replica.image.fingerprint
    first.stop(checkpoint=False)  # as a crash would: no last checkpoint

    restarted = node_factory(service, data_dir=tmp_path, checkpoint=policy, snapshots=False)
    report = restarted.replica.start_report
    assert report is not None and report.resumed_offset == 9_999, report
    assert restarted.replica.records_applied == 5
    assert restarted.replica.image.fingerprint == tail_fingerprint
    full = node_factory(service, node_id="full-replay")
    assert full.replica.records_applied == 10_005
    assert full.replica.image.fingerprint == restarted.replica.image.fingerprint
    assert restarted.replica.command_offsets == full.replica.command_offsets
    assert restarted.status()["startup"]["resumedOffset"] == 9_999


def test_checkpoint_of_a_recreated_topic_is_refused(
        node_factory: NodeFactory, kafka_admin: Admin, tmp_path: Path) -> None:
    service = unique("svc")
    policy = CheckpointPolicy(every_records=1, every_seconds=3600)
    old = node_factory(service, data_dir=tmp_path, checkpoint=policy, snapshots=False)
    old.execute(statement("OLD_ONE"))
    old.execute(statement("OLD_TWO"))
    wait_for_checkpoint(old, old.replica.image.offset)
    topic = old.config.topic
    old.stop()
    kafka_admin.delete(topic)
    eventually(lambda: kafka_admin.describe(topic) is None, 30, f"{topic} to be deleted")

    writer = node_factory(service, node_id="writer")  # re-creates the topic: a new incarnation
    writer.execute(statement("NEW_ONE"))
    restarted = node_factory(service, data_dir=tmp_path, checkpoint=policy, snapshots=False)
    assert set(restarted.replica.image.sources) == {"NEW_ONE"}
    assert restarted.replica.start_report is not None
    assert restarted.replica.start_report.resumed_from is None
    assert "foreign" in (restarted.status()["startup"]["checkpointRejected"] or "")


def test_a_checkpoint_whose_record_the_log_no_longer_holds_is_not_used(
        node_factory: NodeFactory, kafka_settings: object) -> None:
    node = node_factory()
    for name in ("A", "B", "C"):
        node.execute(statement(name))
    image = node.replica.image
    wrong = Resume(ReplicaState(image, {}, {}), record_digest="0" * 64, origin="a test checkpoint")
    replica = LogReplica(node.settings, node.config.topic, group_id=unique("g"))
    replica.resume_from(wrong)
    replica.start()
    try:
        assert replica.wait_ready(30)
        assert replica.start_report is not None and replica.start_report.resumed_from is None
        assert "different record" in (replica.start_report.rejected or "")
        assert replica.records_applied == 3
        assert replica.image.fingerprint == image.fingerprint
    finally:
        replica.stop()


def test_a_new_node_bootstraps_from_the_snapshot_topic(
        node_factory: NodeFactory, tmp_path: Path) -> None:
    service = unique("svc")
    policy = CheckpointPolicy(every_records=6, every_seconds=3600)
    publisher = node_factory(service, data_dir=tmp_path / "a", checkpoint=policy)
    for index in range(4):  # a record and a commit marker each: the checkpoint is due at 6
        publisher.execute(statement(f"SNAP{index}"))
    checkpointer = publisher.checkpointer
    assert checkpointer is not None
    eventually(lambda: checkpointer.status.published >= 1, 30,
               lambda: f"a published snapshot: {checkpointer.status}", interval=0.05)
    assert checkpointer.status.last_offset == 6
    publisher.execute(statement("AFTER_SNAPSHOT"))

    joiner = node_factory(service, node_id="joiner", data_dir=tmp_path / "b", checkpoint=policy)
    report = joiner.replica.start_report
    assert report is not None and (report.resumed_from or "").startswith("snapshot"), report
    assert report.resumed_offset == 6
    assert joiner.replica.records_applied == 1
    assert joiner.replica.image.fingerprint == publisher.replica.image.fingerprint


def test_a_clean_stop_checkpoints_so_the_restart_replays_nothing(
        node_factory: NodeFactory, tmp_path: Path) -> None:
    service = unique("svc")
    policy = CheckpointPolicy(every_records=1000, every_seconds=3600)
    node = node_factory(service, data_dir=tmp_path, checkpoint=policy, snapshots=False)
    for index in range(3):
        node.execute(statement(f"CLEAN{index}"))
    assert node.checkpointer is not None and node.checkpointer.status.written == 0
    fingerprint = node.replica.image.fingerprint
    node.stop()
    restarted = node_factory(service, data_dir=tmp_path, checkpoint=policy, snapshots=False)
    assert restarted.replica.records_applied == 0
    assert restarted.replica.image.fingerprint == fingerprint
