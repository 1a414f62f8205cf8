"""How PRINT shows a topic's records (ksqlDB's ``RecordFormatter``), with no schema to go by.

Keys and values are each tried against every format a record could be in, in ksqlDB's order;
a format that fails on one record is dropped for good, so the candidates narrow as records
arrive, and a record shows as its first remaining format reads it. Keys also try the windowed
forms of each format (``SESSION(F)``, ``HOPPING(F)``, ``TUMBLING(F)``: the key then a window
start, and for a session its end). Bytes no format reads show as Kafka's ``Bytes.toString``.

Formats that need a Schema Registry (AVRO, PROTOBUF, JSON_SR) are not among the candidates: this
metastore has no registry, so they could never read a record.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

NO_DATA = "¯\\_(ツ)_/¯ - no data processed"
Reader = Callable[[bytes], str]


class _UnreadableError(ValueError):
    pass


def _text(data: bytes) -> str:
    if not data:
        raise _UnreadableError("empty")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _UnreadableError("not UTF-8") from error


def _json(data: bytes) -> str:
    text = _text(data)
    try:
        json.loads(text)
    except ValueError as error:
        raise _UnreadableError("not JSON") from error
    return text


def _fixed(size: int, layout: str, show: Callable[[float], str] = str) -> Reader:
    def read(data: bytes) -> str:
        if len(data) != size:
            raise _UnreadableError(f"not {size} bytes")
        return show(struct.unpack(layout, data)[0])
    return read


def java_double(value: float) -> str:
    """``value`` as Java's ``Double.toString`` writes it."""
    if math.isnan(value):
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if str(value).startswith("-") else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        text = repr(value)
        return text if "." in text else text + ".0"
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    shown = "".join(map(str, digits)).rstrip("0") or "0"
    assert isinstance(exponent, int)
    power = len(digits) - 1 + exponent
    return f"{'-' if sign else ''}{shown[0]}.{shown[1:] or '0'}E{power}"


def kafka_bytes_text(data: bytes) -> str:
    """Kafka's ``Bytes.toString``: printable ASCII as is, every other byte as ``\\xHH``."""
    return "".join(chr(b) if 0x20 <= b <= 0x7E and b != 0x5C else f"\\x{b:02X}" for b in data)


@dataclass(frozen=True)
class Format:
    name: str
    read: Reader


FORMATS: tuple[Format, ...] = (
    Format("JSON", _json),
    Format("KAFKA_INT", _fixed(4, ">i")),
    Format("KAFKA_BIGINT", _fixed(8, ">q")),
    Format("KAFKA_DOUBLE", _fixed(8, ">d", java_double)),
    Format("KAFKA_STRING", _text),
)


def _time_windowed(inner: Format, name: str) -> Format:
    def read(data: bytes) -> str:
        if len(data) < 8:
            raise _UnreadableError("no window")
        (start,) = struct.unpack(">q", data[-8:])
        return f"[{inner.read(data[:-8])}@{start}/-]"
    return Format(f"{name}({inner.name})", read)


def _session_windowed(inner: Format) -> Format:
    def read(data: bytes) -> str:
        if len(data) < 16:
            raise _UnreadableError("no session window")
        end, start = struct.unpack(">qq", data[-16:])
        return f"[{inner.read(data[:-16])}@{start}/{end}]"
    return Format(f"SESSION({inner.name})", read)


def key_formats() -> list[Format]:
    """ksqlDB's key candidates: each format's windowed forms, then the format itself."""
    return [candidate for plain in FORMATS for candidate in (
        _session_windowed(plain), _time_windowed(plain, "HOPPING"),
        _time_windowed(plain, "TUMBLING"), plain)]


class Candidates:
    """The formats still possible for one side (keys or values) of a topic's records."""

    def __init__(self, formats: list[Format]) -> None:
        self._formats = formats
        self._seen = False

    @property
    def names(self) -> list[str]:
        return [f.name for f in self._formats] if self._seen else [NO_DATA]

    def show(self, data: bytes | None) -> str:
        """``data`` as the first candidate reads it; drops the candidates that cannot."""
        if data is None:
            return "<null>"
        self._seen = True
        first: str | None = None
        remaining: list[Format] = []
        for candidate in self._formats:
            try:
                shown = candidate.read(data)
            except (_UnreadableError, struct.error):
                continue
            remaining.append(candidate)
            if first is None:
                first = shown
        self._formats = remaining
        return first if first is not None else kafka_bytes_text(data)


@dataclass(frozen=True)
class Record:
    timestamp_ms: int | None
    key: bytes | None
    value: bytes | None
    partition: int


class RecordFormatter:
    def __init__(self) -> None:
        self.keys = Candidates(key_formats())
        self.values = Candidates(list(FORMATS))

    def format(self, records: list[Record]) -> list[str]:
        """Each record's line. A batch that drops the format its first lines were shown in is
        shown again in the format that remains (as ksqlDB does)."""
        active_key, active_value = self.keys.names[:1], self.values.names[:1]
        lines = [self._line(record) for record in records]
        if active_key == self.keys.names[:1] and active_value == self.values.names[:1]:
            return lines
        return [self._line(record) for record in records]

    def _line(self, record: Record) -> str:
        shown = "N/A" if record.timestamp_ms is None else rowtime(record.timestamp_ms)
        return (f"rowtime: {shown}, key: {self.keys.show(record.key)}, value: "
                f"{self.values.show(record.value)}, partition: {record.partition}")


_CYCLE_DAYS = 146_097
"""The days of 400 Gregorian years, after which the calendar repeats."""
_EPOCH_DAY = dt.date(1970, 1, 1)


def rowtime(timestamp_ms: int) -> str:
    """A record's timestamp as ksqlDB's ``yyyy/MM/dd HH:mm:ss.SSS z`` in UTC shows it, for any
    timestamp Kafka holds: Java's proleptic calendar, the year of its era (1 BC is 0001) and
    ``+`` before a year of more than four digits, where Python's dates stop at 9999."""
    days, in_day = divmod(timestamp_ms, 86_400_000)
    cycles, day = divmod(days, _CYCLE_DAYS)
    date = _EPOCH_DAY + dt.timedelta(days=day)
    year = date.year + 400 * cycles
    of_era = year if year > 0 else 1 - year
    seconds, millis = divmod(in_day, 1000)
    return (f"{of_era:04d}" if of_era <= 9999 else f"+{of_era}") + (
        f"/{date.month:02d}/{date.day:02d} {seconds // 3600:02d}:{seconds // 60 % 60:02d}:"
        f"{seconds % 60:02d}.{millis:03d} Z")


def formats_line(prefix: str, names: list[str]) -> str:
    """ksqlDB's ``Key format: ...`` / ``Value format: ...`` line (ksqlDB's text for no
    format starts with a space of its own, after the prefix's)."""
    if not names:
        return (f"{prefix} does not match any supported format. It may be a STRING with "
                "encoding other than UTF8, or some other format.")
    return prefix + " or ".join(names)


__all__ = ["Candidates", "Record", "RecordFormatter", "formats_line", "java_double",
           "kafka_bytes_text", "rowtime"]
