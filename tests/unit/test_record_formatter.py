"""PRINT's record formatting (ksqlDB's RecordFormatter): candidate formats narrow as records
arrive, windowed keys, bytes no format reads, Java's double and timestamp text and the format
lines."""

from __future__ import annotations

import struct

import pytest

from metastore.kafka.record_formatter import (
    NO_DATA,
    Record,
    RecordFormatter,
    formats_line,
    java_double,
    kafka_bytes_text,
    rowtime,
)


def record(key: bytes | None, value: bytes | None, timestamp_ms: int | None = 1_000,
           partition: int = 0) -> Record:
    return Record(timestamp_ms, key, value, partition)


def test_a_json_value_with_an_int_key() -> None:
    formatter = RecordFormatter()
    assert formatter.keys.names == [NO_DATA]
    [line] = formatter.format([record(struct.pack(">i", 7), b'{"A":1}', 1_588_593_600_123, 2)])
    assert line == ('rowtime: 2020/05/04 12:00:00.123 Z, key: 7, value: {"A":1}, partition: 2')
    assert formatter.keys.names[0] == "KAFKA_INT"
    assert formatter.values.names == ["JSON", "KAFKA_STRING"]


def test_candidates_narrow_and_an_earlier_line_is_shown_again_in_the_remaining_format() -> None:
    formatter = RecordFormatter()
    lines = formatter.format([record(None, b"123"), record(None, b"abc")])
    assert formatter.values.names == ["KAFKA_STRING"]
    assert [line.split("value: ")[1] for line in lines] == ["123, partition: 0",
                                                            "abc, partition: 0"]
    assert lines[0].startswith("rowtime: 1970/01/01 00:00:01.000 Z, key: <null>")


def test_windowed_keys() -> None:
    formatter = RecordFormatter()
    tumbling = b"k1" + struct.pack(">q", 5_000)
    [line] = formatter.format([record(tumbling, None)])
    assert "key: [k1@5000/-]" in line and "value: <null>" in line
    assert "TUMBLING(KAFKA_STRING)" in formatter.keys.names
    session = RecordFormatter()
    [line] = session.format([record(b"k" + struct.pack(">qq", 9_000, 4_000), None)])
    assert "key: [k@4000/9000]" in line


def test_bytes_no_format_reads_are_shown_as_kafka_prints_them() -> None:
    formatter = RecordFormatter()
    [line] = formatter.format([record(None, b"\xff\x00\\")])
    assert "value: \\xFF\\x00\\x5C," in line
    assert formatter.values.names == []
    assert formats_line("Value format: ", formatter.values.names).startswith(
        "Value format:  does not match any supported format.")
    assert kafka_bytes_text(b" ~") == " ~"


@pytest.mark.parametrize(("value", "text"), [
    (1.0, "1.0"), (0.5, "0.5"), (1234567.0, "1234567.0"), (1e7, "1.0E7"),
    (12345678.9, "1.23456789E7"), (0.0001, "1.0E-4"), (-2.5e-10, "-2.5E-10"),
    (float("nan"), "NaN"), (float("-inf"), "-Infinity"), (-0.0, "-0.0")])
def test_doubles_read_as_java_writes_them(value: float, text: str) -> None:
    assert java_double(value) == text
    formatter = RecordFormatter()
    formatter.format([record(None, struct.pack(">d", value))])
    assert "KAFKA_DOUBLE" in formatter.values.names


@pytest.mark.parametrize(("timestamp_ms", "text"), [
    (0, "1970/01/01 00:00:00.000 Z"), (-1_000, "1969/12/31 23:59:59.000 Z"),
    (253_402_300_799_999, "9999/12/31 23:59:59.999 Z"),
    (253_402_300_800_000, "+10000/01/01 00:00:00.000 Z"),
    (-62_167_219_200_000, "0001/01/01 00:00:00.000 Z"),  # 1 BC, Java's year of era
    (2**63 - 1, "+292278994/08/17 07:12:55.807 Z"),
    (-(2**63), "+292275056/05/16 16:47:04.192 Z")])
def test_timestamps_past_python_dates_read_as_java_writes_them(timestamp_ms: int,
                                                                 text: str) -> None:
    """Java's formatter prints every instant a Kafka timestamp (a long) can hold."""
    assert rowtime(timestamp_ms) == text
    [line] = RecordFormatter().format([record(None, b"1", timestamp_ms)])
    assert line.startswith(f"rowtime: {text}, key: <null>")
