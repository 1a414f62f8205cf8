"""Whether a sink's records are the records a test expects, and if not, a readable difference.

A stream sink is compared record by record: the same records, and for each key the same order
(the order Kafka keeps, per partition). A table sink is compared on its final value per key:
ksqlDB's test driver emits every intermediate update, a micro-batch runtime one per batch, so
only the last value of each key is comparable; a key whose final expected value is a tombstone
must be absent or deleted. Timestamps, windows and headers are compared where the test gives them.
Numbers compare by value (``1`` equals ``1.0``), a produced text field (DELIMITED, KAFKA) equals
the number it spells, and
object field names compare case-insensitively (as ksqlDB's JSON format reads them).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from metastore.query_tests.cases import CaseRecord, Window


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
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return expected == actual or math.isclose(expected, actual, rel_tol=1e-12, abs_tol=1e-12)
    if isinstance(expected, int | float) and isinstance(actual, str):
        return _number_text(actual) == expected
    if isinstance(expected, dict) and isinstance(actual, dict):
        # ksqlDB reads the expected record through the sink's JSON format, whose field names
        # match columns case-insensitively
        wanted = {str(k).upper(): v for k, v in expected.items()}
        got = {str(k).upper(): v for k, v in actual.items()}
        return wanted.keys() == got.keys() and all(same_value(wanted[k], got[k]) for k in wanted)
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(
            same_value(e, a) for e, a in zip(expected, actual, strict=True))
    return bool(expected == actual)


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
    missing = [r for k, r in wanted.items() if r.value is not None and (
        k not in final or not matches(r, final[k]))]
    extra = [a for k, a in final.items() if a.value is not None and (
        k not in wanted or not matches(wanted[k], a))]
    if not missing and not extra:
        return None
    return "final value per key differs: " + _listing(missing, extra)


def _key_id(key: Any, window: Window | None) -> str:
    normal = json.dumps(key, sort_keys=True, default=str)
    if isinstance(key, float) and key.is_integer():
        normal = json.dumps(int(key))
    return normal + (f"@{window.start}" if window is not None else "")


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
    return json.dumps(value, default=str)


def show_expected(record: CaseRecord) -> str:
    time = f" @{record.timestamp}" if record.timestamp is not None else ""
    window = f" window={record.window.start}..{record.window.end}" if record.window else ""
    return f"{_show(record.key)}{window} -> {_show(record.value)}{time}"


def show_actual(record: ActualRecord) -> str:
    window = f" window={record.window.start}..{record.window.end}" if record.window else ""
    return f"{_show(record.key)}{window} -> {_show(record.value)} @{record.timestamp}"
