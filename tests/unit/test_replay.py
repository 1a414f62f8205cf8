"""The state machine: records, pure apply, canonical fingerprints, determinism across processes."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as strat

from metastore.catalog.exceptions import StatementError
from metastore.catalog.image import EMPTY_IMAGE, REQUEST_WINDOW, Delta, Image, apply
from metastore.engine.validation import Validator, Write
from metastore.log.record import (
    RECORD_VERSION,
    CommandRecord,
    CorruptRecordError,
    IncompatibleRecordError,
    decode,
)
from metastore.planner.support import check_runtime
from metastore.sql.parser import parse
from metastore.testing.check import AssumedTopics
from tests.support.waiting import eventually

NAMES = ["A", "B", "C", "D"]
TYPES = ["INT", "BIGINT", "STRING", "DOUBLE", "BOOLEAN", "ARRAY<STRING>", "STRUCT<X INT>", "T1"]

statement_text = strat.one_of(
    strat.builds(lambda n, t, kind: (
        f"CREATE {'STREAM' if kind else 'TABLE'} {n} (K INT {'KEY' if kind else 'PRIMARY KEY'}, "
        f"V {t}) WITH (KAFKA_TOPIC='{n.lower()}', VALUE_FORMAT='JSON');"),
        strat.sampled_from(NAMES), strat.sampled_from(TYPES), strat.booleans()),
    strat.builds(lambda n, m: f"CREATE STREAM {n} AS SELECT * FROM {m};",
                 strat.sampled_from(NAMES), strat.sampled_from(NAMES)),
    strat.builds(lambda n, m: f"CREATE TABLE {n} AS SELECT K, COUNT(*) AS C FROM {m} GROUP BY K;",
                 strat.sampled_from(NAMES), strat.sampled_from(NAMES)),
    strat.builds(lambda n: f"DROP STREAM {n};", strat.sampled_from(NAMES)),
    strat.builds(lambda n: f"DROP TABLE IF EXISTS {n};", strat.sampled_from(NAMES)),
    strat.builds(lambda n, t: f"ALTER STREAM {n} ADD COLUMN W{len(t)} {t};",
                 strat.sampled_from(NAMES), strat.sampled_from(TYPES)),
    strat.just("TERMINATE ALL;"),
    strat.just("CREATE TYPE T1 AS STRUCT<F STRING>;"),
    strat.just("DROP TYPE T1;"),
)


def validated_records(texts: list[str]) -> tuple[list[CommandRecord], Image]:
    """Validate each statement against the image so far; keep the records that passed."""
    image = EMPTY_IMAGE
    records: list[CommandRecord] = []
    for index, text in enumerate(texts):
        [statement] = parse(text)
        try:
            outcome = Validator(image, AssumedTopics(),
                                runtime_check=check_runtime).validate(statement)
        except StatementError:
            continue
        if isinstance(outcome, Write):
            record = CommandRecord(outcome.command, statement.text, f"req-{index}", "n1")
            records.append(record)
            image = apply(image, record, len(records) - 1)
    return records, image


def replay(encoded: list[bytes]) -> Image:
    delta = Delta(EMPTY_IMAGE)
    for offset, value in enumerate(encoded):
        delta.replay(decode(value, offset), offset)
    return delta.apply()


REPLAY_IN_ANOTHER_PROCESS = """
import json, sys
from metastore.catalog.image import EMPTY_IMAGE, Delta
from metastore.log.record import decode
delta = Delta(EMPTY_IMAGE)
for offset, line in enumerate(open(sys.argv[1])):
    delta.replay(decode(line.strip().encode(), offset), offset)
print(delta.apply().fingerprint)
"""


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(strat.lists(statement_text, min_size=1, max_size=25))
def test_replaying_validated_records_twice_gives_the_same_image(texts: list[str]) -> None:
    records, built = validated_records(texts)
    encoded = [record.encode()[1] for record in records]
    first, second = replay(encoded), replay(encoded)
    assert first.fingerprint == second.fingerprint == built.fingerprint
    assert first.canonical() == built.canonical()


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(strat.lists(statement_text, min_size=3, max_size=25))
def test_replay_in_another_process_gives_the_same_fingerprint(texts: list[str]) -> None:
    records, built = validated_records(texts)
    with tempfile.TemporaryDirectory() as directory:
        log = Path(directory) / "log.jsonl"
        log.write_text("".join(r.encode()[1].decode() + "\n" for r in records))
        replayed = subprocess.run([sys.executable, "-c", REPLAY_IN_ANOTHER_PROCESS, str(log)],
                                  capture_output=True, text=True, check=True).stdout.strip()
    assert replayed == built.fingerprint


def test_every_kind_of_command_replays_in_another_process(tmp_path: Path) -> None:
    texts = [
        "CREATE TYPE T1 AS STRUCT<F STRING>;",
        "CREATE STREAM A (K INT KEY, V T1) WITH (KAFKA_TOPIC='a', VALUE_FORMAT='JSON');",
        "CREATE TABLE B AS SELECT K, COUNT(*) AS C FROM A GROUP BY K;",
        "CREATE STREAM C AS SELECT K, V->F AS F FROM A WHERE K > 1;",
        "ALTER STREAM A ADD COLUMN EXTRA BIGINT;",
        "TERMINATE ALL;", "DROP TABLE B;",
    ]
    records, built = validated_records(texts)
    assert len(records) == len(texts)
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(r.encode()[1].decode() for r in records) + "\n")
    replayed = subprocess.run([sys.executable, "-c", REPLAY_IN_ANOTHER_PROCESS, str(log)],
                              capture_output=True, text=True, check=True).stdout.strip()
    assert replayed == built.fingerprint


def test_query_ids_derive_from_offsets() -> None:
    records, _ = validated_records([
        "CREATE STREAM A (K INT KEY, V INT) WITH (KAFKA_TOPIC='a', VALUE_FORMAT='JSON');",
        "CREATE STREAM B AS SELECT * FROM A;"])
    image = replay([r.encode()[1] for r in records])
    assert set(image.queries) == {"CSAS_B_1"}
    shifted = Delta(EMPTY_IMAGE)
    shifted.replay(records[0], 10)
    shifted.replay(records[1], 17)
    assert set(shifted.apply().queries) == {"CSAS_B_17"}


def test_fingerprint_ignores_creation_order_of_independent_objects() -> None:
    a = "CREATE STREAM A (K INT KEY) WITH (KAFKA_TOPIC='a', VALUE_FORMAT='JSON');"
    b = "CREATE STREAM B (K INT KEY) WITH (KAFKA_TOPIC='b', VALUE_FORMAT='JSON');"
    (_, one), (_, two) = validated_records([a, b]), validated_records([b, a])
    assert one.sources == two.sources
    assert one.canonical()["sources"] == two.canonical()["sources"]


def test_record_round_trip_and_rejections() -> None:
    records, _ = validated_records(["CREATE TYPE T1 AS STRUCT<F STRING>;"])
    key, value = records[0].encode()
    assert key == b"type/T1/create"
    assert decode(value) == records[0]
    newer = json.loads(value) | {"version": RECORD_VERSION + 1}
    with pytest.raises(IncompatibleRecordError):
        decode(json.dumps(newer).encode(), 5)
    for bad in (b"{", b"[]", b'{"version": 1}', json.dumps(
            json.loads(value) | {"command": {"type": "createType", "name": "X",
                                             "sqlType": "NOT A TYPE <"}}).encode(), None):
        with pytest.raises(CorruptRecordError):
            decode(bad, 5)


def test_request_window_is_bounded_and_deterministic() -> None:
    records, _ = validated_records(["CREATE TYPE T1 AS STRUCT<F STRING>;"])
    delta = Delta(EMPTY_IMAGE)
    for offset in range(REQUEST_WINDOW + 5):
        record = CommandRecord(records[0].command, "x", f"r{offset}")
        delta.replay(record, offset)
    requests = delta.apply().requests
    assert len(requests) == REQUEST_WINDOW
    assert "r0" not in requests and f"r{REQUEST_WINDOW + 4}" in requests


@pytest.mark.parametrize("records_per_delta", [1, 7, 40_000])
def test_request_window_keeps_the_newest_requests_in_order_however_records_are_batched(
        records_per_delta: int) -> None:
    """The window is the last REQUEST_WINDOW request ids in order of their newest record (a
    retried request moves to the end), whatever the runs of records replay applies at once:
    the model is a dict that evicts its first key."""
    records, _ = validated_records(["CREATE TYPE T1 AS STRUCT<F STRING>;"])
    ids = [f"r{offset % 13_000}" if offset % 5 else f"r{offset // 3}"
           for offset in range(2 * REQUEST_WINDOW + 3_000)]
    model: dict[str, tuple[int, ...]] = {}
    image = EMPTY_IMAGE
    delta = Delta(image)
    for offset, request_id in enumerate(ids):
        model[request_id] = (*model.pop(request_id, ()), offset)
        while len(model) > REQUEST_WINDOW:
            del model[next(iter(model))]
        delta.replay(CommandRecord(records[0].command, "x", request_id), offset)
        if (offset + 1) % records_per_delta == 0:
            image = delta.apply()
            delta = Delta(image)
    image = delta.apply()
    assert [(k, v.offsets) for k, v in image.requests.items()] == list(model.items())


def test_a_record_that_cannot_be_applied_stops_replay_with_the_image_before_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Validation never writes such a record, but an old or foreign log may hold one: replay
    reports it (the node goes DEGRADED) instead of raising out of the replica's thread, and the
    image is the one before it even when the failed apply changed part of the delta."""
    from metastore.catalog.commands import TerminateCommand
    from metastore.log.record import UnappliableRecordError
    from metastore.log.replay import replay_encoded

    execute = Delta.execute

    def half_applied(delta: Delta, command: object, offset: int) -> None:
        if isinstance(command, TerminateCommand) and command.query_ids == ("POISON",):
            delta.sources.pop("A", None)
            raise KeyError("POISON")
        execute(delta, command, offset)  # type: ignore[arg-type]

    monkeypatch.setattr(Delta, "execute", half_applied)
    records, image = validated_records([
        "CREATE STREAM A (K INT KEY, V STRING) WITH (KAFKA_TOPIC='a', VALUE_FORMAT='JSON');"])
    poisoned = CommandRecord(TerminateCommand(("POISON",)), "TERMINATE POISON;", "x")
    deep = b'{"version": 1, "command": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"
    for bad, kind in ((poisoned.encode()[1], UnappliableRecordError), (deep, CorruptRecordError)):
        values = [r.encode()[1] for r in records] + [bad, records[0].encode()[1]]
        result = replay_encoded(EMPTY_IMAGE, enumerate(values))
        assert isinstance(result.error, kind) and result.error.offset == len(records)
        assert result.image.fingerprint == image.fingerprint
        assert len(result.applied) == len(records)


def test_pause_and_resume_replay_into_the_image_and_its_checkpoint() -> None:
    from metastore.catalog import commands as cmd
    from metastore.checkpoint import codec
    from metastore.log.state import ReplicaState

    records, built = validated_records([
        "CREATE STREAM A (K INT KEY, V INT) WITH (KAFKA_TOPIC='a', VALUE_FORMAT='JSON');",
        "CREATE STREAM B AS SELECT * FROM A;", "CREATE STREAM C AS SELECT * FROM A;",
        "PAUSE ALL;", "RESUME CSAS_C_2;"])
    assert len(records) == 5
    assert records[3].command == cmd.PauseResumeCommand(("CSAS_B_1", "CSAS_C_2"), True, True)
    assert records[3].command.command_id == "pause/ALL/execute"
    assert cmd.from_json(cmd.to_json(records[4].command)) == records[4].command
    assert {q: built.queries[q].paused for q in built.queries} == {"CSAS_B_1": True,
                                                                   "CSAS_C_2": False}
    assert replay([r.encode()[1] for r in records]).fingerprint == built.fingerprint
    unpaused = replay([r.encode()[1] for r in records[:3]])
    assert unpaused.fingerprint != built.fingerprint
    restored = codec.decode(codec.encode(ReplicaState(built, {}, {}))).image
    assert restored.fingerprint == built.fingerprint and restored.queries["CSAS_B_1"].paused


def test_a_replaced_paused_query_stays_paused() -> None:
    """CREATE OR REPLACE changes a query's SQL, not whether it runs: a paused one stays paused
    until RESUME."""
    records, image = validated_records([
        "CREATE STREAM A (K INT KEY, V INT) WITH (KAFKA_TOPIC='a', VALUE_FORMAT='JSON');",
        "CREATE STREAM B AS SELECT * FROM A;", "PAUSE CSAS_B_1;",
        "CREATE OR REPLACE STREAM B AS SELECT * FROM A WHERE V > 0;"])
    assert len(records) == 4
    [query] = image.queries.values()
    assert (query.query_id, query.paused) == ("CSAS_B_1", True)
    assert "V > 0" in query.sql
    assert replay([r.encode()[1] for r in records]).queries["CSAS_B_1"].paused
    _, resumed = validated_records([
        "CREATE STREAM A (K INT KEY, V INT) WITH (KAFKA_TOPIC='a', VALUE_FORMAT='JSON');",
        "CREATE STREAM B AS SELECT * FROM A;", "PAUSE CSAS_B_1;", "RESUME CSAS_B_1;",
        "CREATE OR REPLACE STREAM B AS SELECT * FROM A WHERE V > 0;"])
    assert not resumed.queries["CSAS_B_1"].paused


def test_collector_pauses_nest_and_the_last_resume_restores_the_collector() -> None:
    import gc

    from metastore.log.replay import collector_paused, pause_collector, resume_collector

    assert gc.isenabled()
    pause_collector()  # a replica's catch-up
    with collector_paused():  # a run of records within it
        assert not gc.isenabled()
    assert not gc.isenabled(), "the catch-up still holds the collector paused"
    frozen = gc.get_freeze_count()
    kept = [[index] for index in range(1_000)]
    resume_collector(freeze=True)
    try:
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen + len(kept), "what the catch-up built is frozen"
    finally:
        gc.unfreeze()


class _CorruptLog:
    """A command log reader whose first record cannot be decoded, then nothing."""

    def __init__(self) -> None:
        self.position, self.at_end, self.sent = 0, False, False

    def end_offset(self, timeout: float = 10.0) -> int:
        return 5

    def poll(self, timeout: float, max_records: int = 500) -> list[object]:
        import time

        from metastore.kafka.consumer import Record

        if self.sent:
            time.sleep(timeout)
            return []
        self.sent, self.position, self.at_end = True, 1, True
        return [Record(offset=0, key=b"k", value=b"\xff not a record")]

    def close(self) -> None:
        pass


def test_a_catch_up_that_degrades_resumes_the_collector() -> None:
    """A replica holds the cyclic collector paused while it catches up; a log that degrades it
    (it then serves reads for as long as it runs) must not leave the collector off."""
    import gc

    from metastore.kafka.settings import KafkaSettings
    from metastore.log.reader import LogReplica, NodeState

    replica = LogReplica(KafkaSettings("127.0.0.1:9"), "unused", "unused")
    replica._reader = lambda start: _CorruptLog()
    assert gc.isenabled()
    replica.start()
    try:
        eventually(lambda: replica.state is NodeState.DEGRADED, 10,
                   lambda: f"the replica to degrade, now {replica.state}", interval=0.05)
        eventually(gc.isenabled, 5, "the collector to run while the node stays degraded",
                   interval=0.05)
    finally:
        replica.stop()
    assert gc.isenabled()
