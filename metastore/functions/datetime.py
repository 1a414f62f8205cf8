"""Date and time functions: FORMAT_*/PARSE_*, *ADD/*SUB, UNIX_*, FROM_*, CONVERT_TZ, and the
deprecated TIMESTAMPTOSTRING, STRINGTOTIMESTAMP, DATETOSTRING, STRINGTODATE.

In Spark a TIMESTAMP is computed in the session's time zone, UTC (ksqlDB's default too); a TIME
is an INT of milliseconds of the day, a DATE Spark's DATE. ksqlDB's patterns are Java's
``DateTimeFormatter`` patterns, which Spark's datetime patterns follow for the common letters.
"""

from __future__ import annotations

import re
from datetime import UTC, timedelta, timezone
from datetime import datetime as _datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlglot import exp

from metastore.functions import sparksql as sql
from metastore.functions.registry import (
    INTERVAL_UNIT,
    Call,
    FunctionSpec,
    Translation,
    UntranslatableError,
    scalar,
    sig,
)
from metastore.jvm.classes import DATETIMES_CLASS
from metastore.sql import types as ty

STRING, INTEGER, BIGINT = ty.STRING, ty.INTEGER, ty.BIGINT
DATE, TIME, TIMESTAMP = ty.DATE, ty.TIME, ty.TIMESTAMP

_TIME_PATTERN = "HH:mm:ss.SSS"
_PARTIAL_HELP = ("Required format is: \"yyyy-MM-dd'T'HH:mm:ss.SSS\", with an optional numeric "
                 "4-digit timezone, for example: '2020-05-26T23:59:58.000' or with tz: "
                 "'2020-05-26T23:59:58.000+0200'. A trailing 'Z' instead of tz indicates the "
                 "zero UTC offset. Partials are also supported, for example \"2020-05-26\"")


def partial_timestamp_millis(text: str) -> int:
    """The epoch milliseconds of a possibly partial timestamp (ksqlDB's
    ``PartialStringToTimestampParser``): ``2020``, ``2020-05``, ``2020-05-26``,
    ``2020-05-26T23``, ... ``2020-05-26T23:59:58.000``, with an optional zone (``+0200``,
    ``-05:00``, a trailing ``Z``), UTC without one. Raises ValueError with ksqlDB's message."""
    if "T" in text:
        date, rest = text.split("T", 1)
        sign = "+" if "+" in rest else "-" if "-" in rest else None
        zone = rest[rest.index(sign):] if sign else ""
        time = re.sub("Z$", "", rest[:len(rest) - len(zone)])
    else:
        parts = text.split("-")
        date = text + ("-01-01" if len(parts) == 1 else "-01" if len(parts) == 2 else "")
        time, zone = "", ""
    if len(time) < len(_TIME_PATTERN):
        time += re.sub("[a-zA-Z]", "0", _TIME_PATTERN[len(time):])
    try:
        offset = _zone_offset(zone.strip())
        moment = _datetime.strptime(f"{date}T{time}", "%Y-%m-%dT%H:%M:%S.%f")
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}", f"{date}T{time}"):
            raise ValueError(f"Text '{date}T{time}' could not be parsed")
    except ValueError as error:
        raise ValueError(f"Failed to parse timestamp '{text}': {error}\n{_PARTIAL_HELP}") \
            from None
    return int((moment.replace(tzinfo=offset) - _EPOCH).total_seconds() * 1000)


_EPOCH = _datetime(1970, 1, 1, tzinfo=UTC)


def _zone_offset(zone: str) -> timezone:
    if not zone:
        return UTC
    found = re.fullmatch(r"([+-])(\d{2})(?::?(\d{2}))?(?::?(\d{2}))?", zone)
    if found is None:
        raise ValueError(f"Failed to parse timezone '{zone}'")
    sign = -1 if found.group(1) == "-" else 1
    hours, minutes, seconds = (int(g or 0) for g in found.groups()[1:])
    return timezone(sign * timedelta(hours=hours, minutes=minutes, seconds=seconds))


_SECONDS_PER_UNIT = {
    "DAYS": "86400", "HOURS": "3600", "MINUTES": "60", "SECONDS": "1", "MILLISECONDS": "0.001",
    "MICROSECONDS": "0.000001", "NANOSECONDS": "0.000000001",
}


def _seconds(call: Call) -> exp.Expr:
    """The interval of a *ADD/*SUB call in seconds (a DECIMAL), from its unit and count."""
    unit = call.args[0].name.upper()
    unit = unit if unit.endswith("S") else unit + "S"
    if unit not in _SECONDS_PER_UNIT:
        raise UntranslatableError(f"the time unit {unit} has no Spark translation")
    count = sql.cast(call.args[1], ty.DecimalType(38, 9))
    return sql.mul(count, exp.Literal.number(_SECONDS_PER_UNIT[unit]))


def _shift(kind: str, sign: int) -> Translation:
    def translate(call: Call) -> exp.Expr:
        seconds = _seconds(call)
        if sign < 0:
            seconds = exp.Neg(this=exp.Paren(this=seconds))
        value = call.args[2]
        if kind == "TIMESTAMP":
            interval = sql.fn("make_dt_interval", sql.lit(0), sql.lit(0), sql.lit(0), seconds)
            return sql.add(value, interval)
        if kind == "DATE":
            days = sql.cast(sql.div(seconds, sql.lit(86400)), INTEGER)
            return sql.fn("date_add", value, days)
        millis = sql.cast(sql.mul(seconds, sql.lit(1000)), BIGINT)
        return sql.cast(sql.fn("pmod", sql.add(value, millis), sql.lit(86_400_000)), INTEGER)
    return translate


def _from_zone(timestamp: exp.Expr, zone: list[exp.Expr]) -> exp.Expr:
    return sql.fn("to_utc_timestamp", timestamp, zone[0]) if zone else timestamp


def _format_in_zone(millis: exp.Expr, pattern: exp.Expr, zone: exp.Expr) -> exp.Expr:
    """Epoch milliseconds formatted at a named zone by Java's ``DateTimeFormatter``, as ksqlDB
    does (zone names and offsets of the zone's, which ``date_format`` writes as UTC's), through
    the project's JVM class, whose marked text is read once (a lambda over it); NULL where
    ksqlDB's function fails."""
    called = sql.fn("java_method", sql.lit(DATETIMES_CLASS), sql.lit("formatInZone"),
                    sql.cast(millis, BIGINT), pattern, zone)
    text = exp.to_identifier("__ms_text")
    unmarked = exp.Lambda(this=exp.If(
        this=sql.fn("startswith", exp.column(text.copy()), sql.lit("v")),
        true=sql.fn("substr", exp.column(text.copy()), sql.lit(2)), false=sql.null()),
        expressions=[text])
    return sql.fn("element_at", sql.fn("transform", sql.fn("array", called), unmarked),
                  sql.lit(1))


_ZONE_LETTERS = frozenset("zvVOXxZ")


def _writes_zone(pattern: exp.Expr) -> bool:
    """Whether ``pattern`` may write a zone's name or offset: any pattern but a literal whose
    letters outside quotes are none of Java's zone letters."""
    if not isinstance(pattern, exp.Literal) or not pattern.is_string:
        return True
    unquoted = "".join(part for index, part in enumerate(str(pattern.this).split("'"))
                       if index % 2 == 0)
    return bool(_ZONE_LETTERS & set(unquoted))


def _known_region(zone: exp.Expr) -> bool:
    """Whether ``zone`` is a literal region id (``area/city``) of the time zone database, which
    Spark's ``from_utc_timestamp`` accepts (it fails the query on an unknown zone, where
    ksqlDB's function yields NULL)."""
    if not isinstance(zone, exp.Literal) or not zone.is_string or "/" not in str(zone.this):
        return False
    try:
        ZoneInfo(str(zone.this))
    except (ValueError, ZoneInfoNotFoundError):
        return False
    return True


def _at_zone(millis: exp.Expr, pattern: exp.Expr, zone: exp.Expr) -> exp.Expr:
    """Epoch milliseconds formatted at a named zone: Spark's ``date_format`` of the zone's wall
    time where the pattern writes no zone and the zone is a known region, else Java's formatter
    (:func:`_format_in_zone`, which Spark deems non-deterministic, so not inside an
    aggregate's argument)."""
    if _writes_zone(pattern) or not _known_region(zone):
        return _format_in_zone(millis, pattern, zone)
    wall_time = sql.fn("from_utc_timestamp", sql.fn("timestamp_millis", millis), zone)
    return sql.fn("date_format", wall_time, pattern)


def _format_timestamp(call: Call) -> exp.Expr:
    timestamp, pattern, *zone = call.args
    if zone:
        return _at_zone(sql.fn("unix_millis", timestamp), pattern, zone[0])
    return sql.fn("date_format", timestamp, pattern)


def _timestamp_to_string(call: Call) -> exp.Expr:
    millis, pattern, *zone = call.args
    if zone:
        return _at_zone(millis, pattern, zone[0])
    return sql.fn("date_format", sql.fn("timestamp_millis", millis), pattern)


def _parse_timestamp(call: Call) -> exp.Expr:
    text, pattern, *zone = call.args
    return _from_zone(sql.fn("to_timestamp", text, pattern), zone)


def _string_to_timestamp(call: Call) -> exp.Expr:
    return sql.fn("unix_millis", _parse_timestamp(call))


def _format_time(call: Call) -> exp.Expr:
    time, pattern = call.args
    return sql.fn("date_format", sql.fn("timestamp_millis", time), pattern)


def _parse_time(call: Call) -> exp.Expr:
    text, pattern = call.args
    parsed = sql.fn("to_timestamp", sql.fn("concat", sql.lit("1970-01-01 "), text),
                    sql.fn("concat", sql.lit("yyyy-MM-dd "), pattern))
    return sql.cast(sql.fn("unix_millis", parsed), INTEGER)


def _now_or(spark_function: str, now: str) -> Translation:
    def translate(call: Call) -> exp.Expr:
        return sql.fn(spark_function, *(call.args or [sql.fn(now)]))
    return translate


def _builtin(name: str) -> Translation:
    def translate(call: Call) -> exp.Expr:
        return sql.fn(name, *call.args)
    return translate


def _shifts(name: str, kind: ty.SqlType, sign: int) -> FunctionSpec:
    return scalar(name, sig(INTERVAL_UNIT, INTEGER, kind, returns=kind),
                  spark=_shift(kind.sql(), sign))


FUNCTIONS: tuple[FunctionSpec, ...] = (
    scalar("unix_timestamp", sig(returns=BIGINT), sig(TIMESTAMP, returns=BIGINT),
           spark=_now_or("unix_millis", "current_timestamp")),
    scalar("unix_date", sig(returns=INTEGER), sig(DATE, returns=INTEGER),
           spark=_now_or("unix_date", "current_date")),
    scalar("from_unixtime", sig(BIGINT, returns=TIMESTAMP), spark=_builtin("timestamp_millis")),
    scalar("from_days", sig(INTEGER, returns=DATE), spark=_builtin("date_from_unix_date")),
    scalar("format_timestamp", sig(TIMESTAMP, STRING, returns=STRING),
           sig(TIMESTAMP, STRING, STRING, returns=STRING), spark=_format_timestamp),
    scalar("format_date", sig(DATE, STRING, returns=STRING), spark=_builtin("date_format")),
    scalar("format_time", sig(TIME, STRING, returns=STRING), spark=_format_time),
    scalar("parse_timestamp", sig(STRING, STRING, returns=TIMESTAMP),
           sig(STRING, STRING, STRING, returns=TIMESTAMP), spark=_parse_timestamp,
           raises=True),
    scalar("parse_date", sig(STRING, STRING, returns=DATE), spark=_builtin("to_date"),
           raises=True),
    scalar("parse_time", sig(STRING, STRING, returns=TIME), spark=_parse_time, raises=True),
    scalar("convert_tz", sig(TIMESTAMP, STRING, STRING, returns=TIMESTAMP),
           spark=lambda call: sql.fn("from_utc_timestamp",
                                     sql.fn("to_utc_timestamp", call.args[0], call.args[1]),
                                     call.args[2])),
    _shifts("dateadd", DATE, 1), _shifts("datesub", DATE, -1),
    _shifts("timeadd", TIME, 1), _shifts("timesub", TIME, -1),
    _shifts("timestampadd", TIMESTAMP, 1), _shifts("timestampsub", TIMESTAMP, -1),
    scalar("timestamptostring", sig(BIGINT, STRING, returns=STRING),
           sig(BIGINT, STRING, STRING, returns=STRING), spark=_timestamp_to_string),
    scalar("stringtotimestamp", sig(STRING, STRING, returns=BIGINT),
           sig(STRING, STRING, STRING, returns=BIGINT), spark=_string_to_timestamp,
           raises=True),
    scalar("datetostring", sig(INTEGER, STRING, returns=STRING),
           spark=lambda call: sql.fn("date_format", sql.fn("date_from_unix_date", call.args[0]),
                                     call.args[1])),
    scalar("stringtodate", sig(STRING, STRING, returns=INTEGER),
           spark=lambda call: sql.fn("unix_date", sql.fn("to_date", *call.args)), raises=True),
)
