"""The replica applies what its own writer committed before the reader reads it, then checks it:
the reader must find exactly those records there, or the node degrades. Pure: no Kafka is
contacted (the replica is never started)."""

from __future__ import annotations

from metastore.catalog.commands import CreateTypeCommand
from metastore.kafka.consumer import Record
from metastore.kafka.settings import KafkaSettings
from metastore.log.reader import LogReplica, NodeState
from metastore.log.record import CommandRecord
from metastore.sql.parser import parse_type


def record(offset: int, name: str) -> Record:
    key, value = CommandRecord(CreateTypeCommand(name, parse_type("INT")), f"CREATE TYPE {name} "
                               "AS INT;", f"request-{name}").encode()
    return Record(offset, key, value)


def ready_replica() -> LogReplica:
    replica = LogReplica(KafkaSettings("127.0.0.1:9"), "unused", "unused")
    replica._set_state(NodeState.READY)
    return replica


def test_the_reader_skips_the_records_the_writer_applied_when_the_log_holds_them() -> None:
    replica = ready_replica()
    written = [record(0, "A"), record(1, "B")]
    assert replica.apply_written(written, replica.image)
    image = replica.image
    assert set(image.types) == {"A", "B"} and replica.position == 2
    assert not replica._apply(written, 3), "nothing new: they were applied"
    assert replica.image is image and replica.position == 3 and replica.state is NodeState.READY


def test_a_record_the_writer_did_not_apply_below_the_position_degrades_the_node() -> None:
    replica = ready_replica()
    assert replica.apply_written([record(1, "B")], replica.image)  # offset 0: someone else's
    replica._apply([record(0, "FOREIGN"), record(1, "B")], 3)
    assert replica.state is NodeState.DEGRADED
    degradation = replica.degradation
    assert degradation is not None and degradation.offset == 0
    assert "another producer" in degradation.message


def test_another_record_at_an_offset_the_writer_applied_degrades_the_node() -> None:
    replica = ready_replica()
    assert replica.apply_written([record(0, "A")], replica.image)
    replica._apply([record(0, "OTHER")], 2)
    assert replica.state is NodeState.DEGRADED
