"""Whether a sink's records are the records a test expects, and if not, a readable difference.

A stream sink is compared record by record: the same records, and for each key the same order
(the order Kafka keeps, per partition). A table sink is compared on its final value per key:
ksqlDB's test driver emits every intermediate update, a micro-batch runtime one per batch, so
only the last value of each key is comparable; a key whose final expected value is a tombstone
must be absent or deleted. Timestamps, windows and headers are compared where the test gives them.

Values compare as ksqlDB's test runner compares them (``ExpectedRecordComparator``): an expected
object matches a record with as many fields, each expected field read by its name or, failing
that, its upper-cased name, a field the record lacks reading as null; a sink's JSON number with a
fraction is read as the exact decimal it spells, which an expected text matches only with the
same value and scale (``"3.40"`` matches ``3.40``, not ``3.4``). Numbers compare by value
(``1`` equals ``1.0``), and a produced text field (DELIMITED, KAFKA) equals the number it spells.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from metastore.testing.cases import CaseRecord, Window


@dataclass(frozen=True)
class ActualRecord:
    topic: str
    key: Any
    value: Any
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...]
    window: Window | None
    partition: int
    offset: int


def same_value(expected: Any, actual: Any) -> bool:
    if expected is None or actual is None:
        return expected is None and actual is None
    if isinstance(expected, bool) or isinstance(actual, bool):
        if isinstance(actual, str):
            return str(expected).lower() == actual.lower()
        return isinstance(expected, bool) and isinstance(actual, bool) and expected == actual
    if isinstance(expected, str) and isinstance(actual, Decimal):
        return _same_decimal_text(expected, actual)
    if _is_number(expected) and _is_number(actual):
        return _same_number(expected, actual)
    if _is_number(expected) and isinstance(actual, str):
        return bool(_number_text(actual) == expected)
    if isinstance(expected, Mapping) and isinstance(actual, Mapping):
        return _same_object(expected, actual)
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(
            same_value(e, a) for e, a in zip(expected, actual, strict=True))
    return bool(expected == actual)


def _same_object(expected: Mapping[Any, Any], actual: Mapping[Any, Any]) -> bool:
    """ksqlDB's rule for an expected object: the record has as many fields, and each expected
    field, read by its name or else by its upper-cased name (absent reads as null), matches.
    A field the sink lacks therefore matches only an expected null (Java's ``Map.get`` cannot
    tell an absent field from a null one); the field counts must still agree."""
    if len(expected) != len(actual):
        return False
    for name, wanted in expected.items():
        got = actual.get(name)
        if got is None and isinstance(name, str):
            got = actual.get(name.upper())
        if not same_value(wanted, got):
            return False
    return True


_DECIMAL_TEXT = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def _same_decimal_text(expected: str, actual: Decimal) -> bool:
    """An expected text against an exact number: ksqlDB reads the text as a BigDecimal and
    requires it to equal the produced one, scale included (``"3.40"`` is not ``3.4``)."""
    if not _DECIMAL_TEXT.fullmatch(expected):
        return False
    try:
        wanted = Decimal(expected)
    except InvalidOperation:
        return False
    return wanted == actual and wanted.as_tuple().exponent == actual.as_tuple().exponent


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def _same_number(expected: int | float | Decimal, actual: int | float | Decimal) -> bool:
    if not isinstance(expected, float) and not isinstance(actual, float):
        return Decimal(expected) == Decimal(actual)  # exact: ints and decimals of any size
    wanted, got = float(expected), float(actual)
    return wanted == got or math.isclose(wanted, got, rel_tol=1e-12, abs_tol=1e-12)


def _number_text(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def matches(expected: CaseRecord, actual: ActualRecord) -> bool:
    if not same_value(expected.key, actual.key) or not same_value(expected.value, actual.value):
        return False
    if expected.timestamp is not None and expected.timestamp != actual.timestamp:
        return False
    if expected.window is not None and (
            actual.window is None or expected.window.start != actual.window.start
            or (expected.window.end != actual.window.end and expected.window.kind != "SESSION"
                and expected.window.end != 0)):
        return False
    return expected.headers is None or list(expected.headers) == [
        h for h in actual.headers if not h[0].startswith("metastore.")]


def stream_difference(expected: Sequence[CaseRecord], actual: Sequence[ActualRecord]
                      ) -> str | None:
    """Why ``actual`` (in partition, offset order) is not the stream ``expected``, or None."""
    unmatched = list(actual)
    missing: list[CaseRecord] = []
    for record in expected:
        found = next((i for i, a in enumerate(unmatched) if matches(record, a)), None)
        if found is None:
            missing.append(record)
        else:
            unmatched.pop(found)
    if missing or unmatched:
        return _listing(missing, unmatched)
    for record in expected:
        wanted = [r for r in expected if same_value(r.key, record.key)]
        produced = [a for a in actual if same_value(record.key, a.key)]
        for want, got in zip(wanted, produced, strict=False):
            if not matches(want, got):
                return (f"records out of order for key {_show(record.key)}: expected "
                        f"{show_expected(want)} "
                        f"where {show_actual(got)} came")
    return None


def table_difference(expected: Sequence[CaseRecord], actual: Sequence[ActualRecord]
                     ) -> str | None:
    """Why the final value per key of ``actual`` is not that of ``expected``, or None."""
    wanted: dict[str, CaseRecord] = {}
    for record in expected:
        wanted[_key_id(record.key, record.window)] = record
    final: dict[str, ActualRecord] = {}
    for produced in actual:
        final[_key_id(produced.key, produced.window)] = produced
    claimed: dict[str, CaseRecord] = {}  # produced key -> the expected record of that key
    missing = []
    for key, record in wanted.items():
        found = key if key in final else next(
            (k for k, a in final.items() if k not in claimed and _same_key(record, a)), None)
        if found is not None:
            claimed[found] = record
        if record.value is not None and (found is None or not matches(record, final[found])):
            missing.append(record)
    extra = [a for k, a in final.items() if a.value is not None and (
        k not in claimed or not matches(claimed[k], a))]
    if not missing and not extra:
        return None
    return "final value per key differs: " + _listing(missing, extra)


def _same_key(expected: CaseRecord, actual: ActualRecord) -> bool:
    """The same key where the two spell it differently (a text against an exact decimal)."""
    return same_value(expected.key, actual.key) and (
        expected.window is None) == (actual.window is None) and (
        expected.window is None or actual.window is None
        or expected.window.start == actual.window.start)


def _key_id(key: Any, window: Window | None) -> str:
    if isinstance(key, Decimal):
        key = float(key)
    normal = json.dumps(key, sort_keys=True, default=str)
    if isinstance(key, float) and key.is_integer():
        normal = json.dumps(int(key))
    if window is None:
        return normal
    # a session's key holds its end too: a merged session is a key of its own
    return normal + f"@{window.start}" + (f"..{window.end}" if window.kind.upper() == "SESSION"
                                          else "")


def _listing(missing: Sequence[CaseRecord], unexpected: Sequence[ActualRecord]) -> str:
    lines = []
    if missing:
        lines.append("expected but not produced: " + "; ".join(
            show_expected(r) for r in missing[:5]) + (" ..." if len(missing) > 5 else ""))
    if unexpected:
        lines.append("produced but not expected: " + "; ".join(
            show_actual(r) for r in unexpected[:5]) + (" ..." if len(unexpected) > 5 else ""))
    return " | ".join(lines)


def _show(value: Any) -> str:
    """``value`` as JSON, an exact decimal as the number it spells (``3.40``)."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {_show(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return json.dumps(value, default=str)


def show_expected(record: CaseRecord) -> str:
    time = f" @{record.timestamp}" if record.timestamp is not None else ""
    window = f" window={record.window.start}..{record.window.end}" if record.window else ""
    return f"{_show(record.key)}{window} -> {_show(record.value)}{time}"


def show_actual(record: ActualRecord) -> str:
    window = f" window={record.window.start}..{record.window.end}" if record.window else ""
    return f"{_show(record.key)}{window} -> {_show(record.value)} @{record.timestamp}"
