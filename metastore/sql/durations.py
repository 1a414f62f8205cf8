"""Durations as ksqlDB writes them ('10 SECONDS', '1 HOUR') converted to milliseconds."""

from __future__ import annotations

UNIT_MS = {
    "MILLISECOND": 1, "SECOND": 1000, "MINUTE": 60_000, "HOUR": 3_600_000, "DAY": 86_400_000,
}


MAX_MS = 2**63 - 1
"""The largest duration ksqlDB takes (a Java long of milliseconds)."""


class DurationError(ValueError):
    pass


def parse_duration_ms(text: str) -> int:
    parts = text.strip().split()
    if len(parts) != 2:
        raise DurationError(f"Invalid duration: '{text}'. Expected '<number> <unit>', e.g. '10 SECONDS'")
    number, unit = parts
    if not number.isdigit():
        raise DurationError(f"Invalid duration: '{text}'. Not a whole number: '{number}'")
    normalised = unit.upper()
    if normalised.endswith("S"):
        normalised = normalised[:-1]
    if normalised not in UNIT_MS:
        raise DurationError(f"Invalid duration: '{text}'. Unknown time unit: '{unit.upper()}'")
    millis = int(number) * UNIT_MS[normalised]
    if millis > MAX_MS:  # ksqlDB's durations are Java longs of milliseconds
        raise DurationError(f"Invalid duration: '{text}'. It exceeds {MAX_MS} milliseconds")
    return millis
