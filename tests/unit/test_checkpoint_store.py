"""Checkpoint payloads and files: lossless round trips, and every damaged file refused."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as strat

from metastore.catalog.image import EMPTY_IMAGE, REQUEST_WINDOW, Delta, apply
from metastore.catalog.lazy import LazyDict
from metastore.checkpoint.checkpointer import Checkpointer, CheckpointPolicy
from metastore.checkpoint.codec import ReplicaState, decode, encode
from metastore.checkpoint.exceptions import CheckpointError
from metastore.checkpoint.store import (
    FORMAT_VERSION,
    MAGIC,
    Checkpoint,
    CheckpointHeader,
    CheckpointStore,
    Incarnation,
    parse,
    record_digest,
)
from metastore.core.faults import Faults
from tests.unit.test_replay import statement_text, validated_records

INCARNATION = Incarnation("svc", "_metastore-svc-command-log", "topic-id-1")


def checkpoint_at(offset: int, payload: bytes = b"payload", fmt: int = FORMAT_VERSION,
                  incarnation: Incarnation = INCARNATION) -> Checkpoint:
    return Checkpoint(CheckpointHeader(fmt, incarnation.service_id, incarnation.topic,
                                       incarnation.topic_id, offset, "d" * 64, "node-1"), payload)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(strat.lists(statement_text, min_size=1, max_size=30))
def test_the_payload_round_trips_every_image(texts: list[str]) -> None:
    records, image = validated_records(texts)
    state = ReplicaState(image, {r.command_id: i for i, r in enumerate(records)}, {"n1": 3})
    decoded = decode(encode(state))
    assert decoded.image.fingerprint == image.fingerprint
    assert decoded.image.offset == image.offset
    assert list(decoded.image.requests) == list(image.requests)
    assert decoded.command_offsets == state.command_offsets
    assert decoded.origin_nodes == {"n1": 3}


def test_the_request_window_keeps_its_eviction_order_across_a_checkpoint() -> None:
    records, _ = validated_records(["CREATE TYPE T1 AS STRUCT<F STRING>;"])
    [record] = records
    delta = Delta(EMPTY_IMAGE)
    for offset in range(REQUEST_WINDOW + 5):
        delta.replay(record.__class__(record.command, "s", f"req-{(offset * 7919) % 20011}"), offset)
    image = delta.apply()
    restored = decode(encode(ReplicaState(image, {}, {}))).image
    following = record.__class__(record.command, "s", "one-more")
    assert (apply(restored, following, 99_999).fingerprint
            == apply(image, following, 99_999).fingerprint)


def test_a_whole_checkpoint_parses_and_a_damaged_one_never_does() -> None:
    data = checkpoint_at(41).to_bytes()
    assert parse(data, INCARNATION).header.offset == 41
    with pytest.raises(CheckpointError) as torn:
        parse(data[:-10], INCARNATION)
    assert torn.value.reason == "torn"
    flipped = bytearray(data)
    flipped[len(MAGIC) + 20] ^= 0x01
    with pytest.raises(CheckpointError) as corrupt:
        parse(bytes(flipped), INCARNATION)
    assert corrupt.value.reason == "torn"
    with pytest.raises(CheckpointError) as garbage:
        parse(b"not a checkpoint at all", INCARNATION)
    assert garbage.value.reason == "corrupt"


def test_newer_formats_and_other_incarnations_are_refused() -> None:
    with pytest.raises(CheckpointError) as newer:
        parse(checkpoint_at(1, fmt=FORMAT_VERSION + 1).to_bytes(), INCARNATION)
    assert newer.value.reason == "newer-format"
    recreated = Incarnation(INCARNATION.service_id, INCARNATION.topic, "topic-id-2")
    with pytest.raises(CheckpointError) as foreign:
        parse(checkpoint_at(1, incarnation=recreated).to_bytes(), INCARNATION)
    assert foreign.value.reason == "foreign"


class StoppedReplica:
    """What a checkpointer reads of a stopped replica: its image, as captured."""

    start_report = None

    def __init__(self, state: ReplicaState) -> None:
        self.image = state.image
        self._state = state

    def capture(self) -> tuple[ReplicaState, str]:
        return self._state, "d" * 64


def test_a_paused_query_is_checkpointed_in_a_format_older_nodes_refuse(tmp_path: Path) -> None:
    """An older node reads format 1 and would restore a paused query as running: an image with
    one is written as format 2; any other stays format 1, its payload unchanged."""
    ddl = ["CREATE STREAM A (K INT KEY, V INT) WITH (KAFKA_TOPIC='a', VALUE_FORMAT='JSON');",
           "CREATE STREAM B AS SELECT * FROM A;"]
    formats = {}
    for name, texts in (("running", ddl), ("paused", [*ddl, "PAUSE ALL;"]),
                        ("resumed", [*ddl, "PAUSE ALL;", "RESUME ALL;"])):
        _, image = validated_records(texts)
        state = ReplicaState(image, {}, {})
        store = CheckpointStore(tmp_path / name)
        checkpointer = Checkpointer(store, INCARNATION, "node-1", CheckpointPolicy())
        checkpointer.start()
        checkpointer.stop(StoppedReplica(state))
        written = parse(store.paths()[0].read_bytes(), INCARNATION)
        formats[name] = written.header.format
        assert written.state().image.fingerprint == image.fingerprint
        if name != "paused":
            assert b"true" not in zlib.decompress(written.payload), "format 1's payload"
    assert formats == {"running": 1, "paused": 2, "resumed": 1}


@pytest.mark.parametrize(("fmt", "reason"), [(1, None), (2, None), (3, None),
                                             (4, "newer-format"), (0, "corrupt"),
                                             (-1, "corrupt")])
def test_only_the_formats_this_node_knows_are_read(fmt: int, reason: str | None) -> None:
    data = checkpoint_at(1, fmt=fmt).to_bytes()
    if reason is None:
        assert parse(data, INCARNATION).header.format == fmt
        return
    with pytest.raises(CheckpointError) as refused:
        parse(data, INCARNATION)
    assert refused.value.reason == reason


def test_an_undecodable_payload_is_corrupt() -> None:
    with pytest.raises(CheckpointError) as error:
        decode(b"\x78\x01garbage")
    assert error.value.reason == "corrupt"


def test_the_store_falls_back_to_the_newest_usable_checkpoint(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path, keep=3)
    for offset in (10, 20, 30):
        store.write(checkpoint_at(offset))
    newest = store.paths()[0]
    newest.write_bytes(newest.read_bytes()[:100])  # torn in place
    warnings: list[str] = []
    loaded = store.load_newest(INCARNATION, warnings.append)
    assert loaded is not None and loaded.header.offset == 20
    assert len(warnings) == 1 and "torn" in warnings[0]


def test_the_store_keeps_the_newest_and_cleans_up_partial_files(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path, keep=2)
    (tmp_path / ".checkpoint-00000000000000000001.ckpt.999999.tmp").write_bytes(b"half")
    for offset in (1, 2, 3):
        store.write(checkpoint_at(offset))
    assert [p.name for p in store.paths()] == ["checkpoint-00000000000000000003.ckpt",
                                               "checkpoint-00000000000000000002.ckpt"]
    assert not list(tmp_path.glob("*.tmp"))


def test_a_write_interrupted_half_way_leaves_the_previous_checkpoint(tmp_path: Path) -> None:
    class CrashError(Exception):
        pass

    def crash(_partial: Path) -> None:
        raise CrashError

    CheckpointStore(tmp_path).write(checkpoint_at(5))
    store = CheckpointStore(tmp_path, faults=Faults(during_checkpoint_write=crash))
    with pytest.raises(CrashError):
        store.write(checkpoint_at(9))
    loaded = CheckpointStore(tmp_path).load_newest(INCARNATION)
    assert loaded is not None and loaded.header.offset == 5


def test_record_digests_tell_key_and_value_apart() -> None:
    assert record_digest(b"ab", b"c") != record_digest(b"a", b"bc")
    assert record_digest(None, b"x") == record_digest(b"", b"x")
    assert len(json.dumps(record_digest(b"k", b"v"))) == 66


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(strat.lists(statement_text, min_size=2, max_size=30), strat.integers(0, 30))
def test_replaying_on_a_restored_image_equals_replaying_on_the_original(
        texts: list[str], split: int) -> None:
    records, image = validated_records(texts)
    cut = min(split, len(records))
    original = EMPTY_IMAGE
    for offset, record in enumerate(records[:cut]):
        original = apply(original, record, offset)
    restored = decode(encode(ReplicaState(original, {}, {}))).image
    for offset, record in enumerate(records[cut:], start=cut):
        original = apply(original, record, offset)
        restored = apply(restored, record, offset)
    assert restored.fingerprint == original.fingerprint == image.fingerprint
    assert list(restored.sources) == list(original.sources)


operation = strat.tuples(strat.sampled_from(["set", "del", "copy"]), strat.sampled_from("ABCDEFG"),
                         strat.integers(0, 9))


@settings(max_examples=300, deadline=None)
@given(strat.dictionaries(strat.sampled_from("ABCDEF"), strat.integers(0, 9)),
       strat.lists(operation, max_size=40))
def test_a_lazy_dict_behaves_as_a_dict(restored: dict[str, int], operations: list) -> None:  # type: ignore[type-arg]
    keys = list(restored)
    lazy: LazyDict[int] = LazyDict({k: i for i, k in enumerate(keys)}, lambda i: restored[keys[i]])
    plain = dict(restored)
    generations: list[tuple[LazyDict[int], dict[str, int]]] = []
    for kind, key, value in operations:
        if kind == "set":
            lazy[key] = value
            plain[key] = value
        elif kind == "del" and key in plain:
            del lazy[key]
            del plain[key]
        elif kind == "copy":
            generations.append((lazy, dict(plain)))
            lazy, plain = lazy.copy(), dict(plain)
        assert key not in plain or lazy[key] == plain[key]
        assert key in lazy if key in plain else key not in lazy
    generations.append((lazy, plain))
    for seen, expected in generations:  # earlier generations are unchanged by later writes
        assert list(seen.items()) == list(expected.items())
        assert len(seen) == len(expected)
