"""`metastore log repair` and `log restore` against the real broker.

A service's log gets records no node can replay, written the way an older version could have
(a CREATE TYPE nested deeper than replay allows, a TERMINATE whose command makes apply raise, an
undecodable value). Nodes go DEGRADED at the first; a repair leaves them out, keeps every other
record at its offset (query ids derive from offsets), and a restore from the backup brings the
poisoned log back.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer
from typer.testing import CliRunner

from cli.main import app
from metastore.catalog.commands import DropSourceCommand
from metastore.cluster.membership import membership_topic_name
from metastore.kafka.admin import Admin
from metastore.kafka.settings import KafkaSettings
from metastore.log.backup import (
    Backup,
    StoredRecord,
    TopicShape,
    read_backup,
    read_records,
    write_backup,
)
from metastore.log.exceptions import RepairError
from metastore.log.reader import NodeState
from metastore.log.record import CommandRecord
from metastore.log.repair import RepairOptions, RestoreOptions, find_unreplayable, repair, restore
from metastore.server.node import Node
from metastore.sql.statements import SourceKind
from tests.support.kafka import unique

NodeFactory = Callable[..., Node]
Entry = tuple[bytes | None, bytes | None]


def create_stream(name: str) -> str:
    return (f"CREATE STREAM {name} (ID INT KEY, V STRING) "
            f"WITH (KAFKA_TOPIC='{unique(name.lower())}', VALUE_FORMAT='JSON', PARTITIONS=1);")


def too_deep_type() -> Entry:
    """A CREATE TYPE nested 40 deep: accepted before replay bounded types to 32 levels."""
    sql_type = "INT"
    for _ in range(40):
        sql_type = f"STRUCT<A {sql_type}>"
    value = {"version": 1, "statement": "CREATE TYPE DEEP AS ...;", "requestId": "old-version",
             "command": {"type": "createType", "name": "DEEP", "sqlType": sql_type}}
    return b"type/DEEP/create", json.dumps(value).encode()


def terminate_that_raises() -> Entry:
    """A TERMINATE whose query ids are not strings: it decodes, and applying it raises."""
    value = {"version": 1, "statement": "TERMINATE X;", "requestId": "broken",
             "command": {"type": "terminate", "queryIds": [["X"]]}}
    return b"terminate/X/execute", json.dumps(value).encode()


def drop(name: str, request_id: str) -> Entry:
    return CommandRecord(DropSourceCommand(SourceKind.STREAM, name), f"DROP STREAM {name};",
                         request_id).encode()


def write_transactions(settings: KafkaSettings, topic: str,
                       transactions: Sequence[Sequence[Entry]]) -> list[list[int]]:
    """Each group of records in a transaction of its own; the offsets they got."""
    producer = Producer(settings.config(transactional_id=unique("poisoner"), linger_ms=0))
    producer.init_transactions(30)
    offsets: list[list[int]] = []
    for records in transactions:
        delivered: list[int] = []
        producer.begin_transaction()
        for key, value in records:
            producer.produce(topic, key=key, value=value,
                             on_delivery=lambda _e, m, out=delivered: out.append(m.offset()))
        producer.commit_transaction(30)
        offsets.append(sorted(delivered))
    return offsets


def write_plain(settings: KafkaSettings, topic: str, records: Sequence[Entry]) -> list[int]:
    producer = Producer(settings.config(linger_ms=0))
    delivered: list[int] = []
    for key, value in records:
        producer.produce(topic, key=key, value=value,
                         on_delivery=lambda _e, m: delivered.append(m.offset()))
    producer.flush(30)
    return delivered


@dataclass(frozen=True)
class Poisoned:
    service_id: str
    topic: str
    too_deep: int
    """Offset of the CREATE TYPE nested too deep: every node stops here."""
    dropped: int
    """Offset of a valid DROP STREAM S2 after it."""
    raising: int
    """Offset of the TERMINATE that makes apply raise, last in the DROP's transaction (a valid
    transaction follows)."""
    query_ids: frozenset[str]
    records: list[StoredRecord]


@pytest.fixture
def poisoned(node_factory: NodeFactory, kafka_settings: KafkaSettings) -> Poisoned:
    node = node_factory()
    for statement in (create_stream("S1"), create_stream("S2"),
                      "CREATE STREAM DERIVED AS SELECT * FROM S1;"):
        node.execute(statement)
    query_ids = frozenset(node.replica.image.queries)
    node.stop()
    topic = node.config.topic
    [[too_deep], [dropped, raising], _tail] = write_transactions(
        kafka_settings, topic, [[too_deep_type()], [drop("S2", "later"), terminate_that_raises()],
                                [drop("NOPE", "tail")]])
    records = read_records(kafka_settings, topic, unique("read"))
    return Poisoned(node.config.service_id, topic, too_deep, dropped, raising, query_ids, records)


def degraded_at(node_factory: NodeFactory, service_id: str) -> int:
    node = node_factory(service_id=service_id, node_id=unique("observer"), ready=False)
    try:
        assert not node.replica.wait_ready(30)
        assert node.state is NodeState.DEGRADED
        assert node.replica.degradation is not None
        return node.replica.degradation.offset
    finally:
        node.stop()


def topic_id(kafka_admin: Admin, topic: str) -> str:
    return kafka_admin.topic_id(topic)


def test_repair_leaves_out_unreplayable_records_and_restore_brings_them_back(
        poisoned: Poisoned, node_factory: NodeFactory, kafka_settings: KafkaSettings,
        kafka_admin: Admin, tmp_path: Path) -> None:
    service, topic = poisoned.service_id, poisoned.topic
    assert degraded_at(node_factory, service) == poisoned.too_deep

    backup = tmp_path / "backup.json"
    report = repair(kafka_settings, service, backup,
                    RepairOptions(skip_unappliable=True, confirmed=True))
    assert [(s.offset, s.kind) for s in report.plan.skipped] == [
        (poisoned.too_deep, "CORRUPTED"), (poisoned.raising, "UNAPPLIABLE")]
    assert "Type nested deeper than 32" in report.plan.skipped[0].reason
    done = report.rewritten
    assert done is not None and done.old_topic_id != done.new_topic_id
    assert topic_id(kafka_admin, topic) == done.new_topic_id

    saved = read_backup(backup)
    assert [r.identity for r in saved.records] == [r.identity for r in poisoned.records]
    assert (saved.service_id, saved.topic) == (service, topic)
    skipped = {poisoned.too_deep, poisoned.raising}
    kept = [r.identity for r in poisoned.records if r.offset not in skipped]
    assert [r.identity for r in read_records(kafka_settings, topic, unique("read"))] == kept, \
        "every kept record is back at its own offset"

    node = node_factory(service_id=service, node_id="after-repair")
    image = node.replica.image
    assert image.fingerprint == report.plan.image.fingerprint == done.image.fingerprint
    assert set(image.sources) == {"S1", "DERIVED"}, "S2 was dropped after the bad record"
    assert set(image.queries) == poisoned.query_ids, "query ids derive from unchanged offsets"
    [entity] = node.execute(create_stream("S3"))
    assert entity["commandStatus"]["status"] == "SUCCESS"
    node.stop()

    refused = restore(kafka_settings, service, backup, RestoreOptions(confirmed=True))
    assert refused.rewritten is None and refused.refusal is not None
    assert [r.key_text() for r in refused.discarded] == ["stream/S3/create"]
    assert topic_id(kafka_admin, topic) == done.new_topic_id, "a refused restore changes nothing"

    restored = restore(kafka_settings, service, backup,
                       RestoreOptions(confirmed=True, discard_newer=True))
    assert restored.rewritten is not None and restored.rewritten.bad_record is not None
    assert restored.rewritten.bad_record.offset == poisoned.too_deep
    assert [r.identity for r in read_records(kafka_settings, topic, unique("read"))] == [
        r.identity for r in poisoned.records]
    assert degraded_at(node_factory, service) == poisoned.too_deep


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["log", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_repair_and_restore_through_the_cli(
        poisoned: Poisoned, node_factory: NodeFactory, kafka_bootstrap: str,
        kafka_settings: KafkaSettings, kafka_admin: Admin, tmp_path: Path) -> None:
    service, topic = poisoned.service_id, poisoned.topic
    before = topic_id(kafka_admin, topic)
    backup = tmp_path / "backup.json"
    common = ["--bootstrap-servers", kafka_bootstrap, "--service-id", service,
              "--backup", str(backup)]

    code, out, err = cli("repair", *common)
    assert code == 1 and "2 record(s) cannot be replayed" in err
    assert f"offsets {poisoned.too_deep}, {poisoned.raising}" in err
    assert "KEEP (fails)" in out

    marker = poisoned.raising + 1
    code, _out, err = cli("repair", *common, "--skip-offset", str(marker), "--yes")
    assert code == 1 and f"offset(s) {marker} hold no committed record" in err

    code, out, err = cli("repair", *common, "--skip-unappliable", "--dry-run", "--json")
    assert code == 0, err
    planned = json.loads(out)
    assert [s["offset"] for s in planned["skipped"]] == [poisoned.too_deep, poisoned.raising]
    assert planned["written"] is False and planned["kept"] == len(poisoned.records) - 2

    code, out, _err = cli("repair", *common, "--skip-unappliable")
    assert code == 1 and "run this again with --yes" in out
    assert not backup.exists() and topic_id(kafka_admin, topic) == before, "nothing changed"
    assert degraded_at(node_factory, service) == poisoned.too_deep

    code, out, err = cli("repair", *common, "--skip-unappliable", "--yes", "--json")
    assert code == 0, err
    repaired = json.loads(out)
    assert repaired["written"] and repaired["result"]["newTopicId"] != before
    assert repaired["result"]["fingerprint"] == planned["fingerprint"]
    node = node_factory(service_id=service, node_id="after-cli-repair")
    assert node.replica.image.fingerprint == planned["fingerprint"]
    node.stop()

    code, out, err = cli("repair", *common, "--skip-unappliable", "--yes")
    assert code == 1 and "already exists" in err, "a backup is never overwritten"

    code, out, err = cli("restore", "--bootstrap-servers", kafka_bootstrap, "--service-id",
                         service, "--backup", str(backup), "--yes", "--json")
    assert code == 0, err
    assert json.loads(out)["result"]["badRecord"]["offset"] == poisoned.too_deep
    assert degraded_at(node_factory, service) == poisoned.too_deep


def test_a_skipped_first_record_leaves_the_others_at_their_offsets(
        node_factory: NodeFactory, kafka_settings: KafkaSettings, kafka_admin: Admin,
        tmp_path: Path) -> None:
    node = node_factory()
    service, topic = node.config.service_id, node.config.topic
    node.stop()
    assert write_plain(kafka_settings, topic, [(b"stream/BAD/create", b"\x00\xffnot json"),
                                               drop("NOPE", "first")]) == [0, 1]
    write_transactions(kafka_settings, topic, [[drop("NOPE", "second")]])
    assert degraded_at(node_factory, service) == 0

    report = repair(kafka_settings, service, tmp_path / "backup.json",
                    RepairOptions(skip_offsets=frozenset({0}), confirmed=True))
    assert report.rewritten is not None
    found = read_records(kafka_settings, topic, unique("read"))
    assert [r.offset for r in found] == [1, 2]
    node = node_factory(service_id=service, node_id="after")
    assert node.replica.image.fingerprint == report.plan.image.fingerprint
    assert node.execute(create_stream("LATER"))[0]["commandStatus"]["status"] == "SUCCESS"


def test_a_node_with_a_fresh_heartbeat_stops_the_repair(
        poisoned: Poisoned, kafka_settings: KafkaSettings, kafka_admin: Admin,
        tmp_path: Path) -> None:
    nodes = membership_topic_name(poisoned.service_id)
    kafka_admin.create(nodes, partitions=1, config={"cleanup.policy": "compact"})
    beat = {"nodeId": "node-1", "url": "http://127.0.0.1:8088", "state": "DEGRADED",
            "appliedOffset": 3, "timestampMs": int(time.time() * 1000)}
    write_plain(kafka_settings, nodes, [(b"node-1", json.dumps(beat).encode())])
    before = topic_id(kafka_admin, poisoned.topic)
    with pytest.raises(RepairError, match="are running: node-1"):
        repair(kafka_settings, poisoned.service_id, tmp_path / "backup.json",
               RepairOptions(skip_unappliable=True, confirmed=True))
    assert topic_id(kafka_admin, poisoned.topic) == before
    assert not (tmp_path / "backup.json").exists()


def test_replay_leaves_out_each_failing_record_and_goes_on() -> None:
    entries = [drop("A", "r0"), too_deep_type(), drop("B", "r2"), terminate_that_raises(),
               drop("C", "r4")]
    records = [StoredRecord(offset * 2, key, value) for offset, (key, value) in enumerate(entries)]
    image, failures = find_unreplayable(records)
    assert [(f.offset, f.kind) for f in failures] == [(2, "CORRUPTED"), (6, "UNAPPLIABLE")]
    assert list(image.requests) == ["r0", "r2", "r4"] and image.offset == 8
    _, without = find_unreplayable(records, frozenset({2}))
    assert [f.offset for f in without] == [6]


def test_a_backup_is_never_overwritten_and_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "backup.json"
    records = (StoredRecord(0, b"k", b"\x00\xff", (("h", b"v"), ("n", None)), 1234),
               StoredRecord(3, None, None))
    backup = Backup("svc", "_metastore-svc-command-log", "id", TopicShape(1, 1, 1048588), records,
                    "2026-01-01T00:00:00+00:00")
    write_backup(path, backup)
    assert read_backup(path) == backup
    with pytest.raises(RepairError, match="already exists"):
        write_backup(path, backup)
    path.write_text(path.read_text()[:-20])
    with pytest.raises(RepairError, match="cannot read the backup"):
        read_backup(path)
