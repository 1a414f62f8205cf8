"""SHOW PROPERTIES: the settings a request runs with (ksqlDB's ``ListPropertiesExecutor``).

The list holds the node's own settings (its service id and Kafka bootstrap servers), ksqlDB's
defaults of the settings that have an effect here (see :mod:`metastore.engine.overrides`),
and every override of the request (``streamsProperties``, then its SET / UNSET statements), by
name. As in ksqlDB's ``KsqlConfig``, a Kafka Streams or client setting is listed under its
``ksql.streams.`` name (``auto.offset.reset`` as ``ksql.streams.auto.offset.reset``).
``overwrittenProperties`` names those whose value differs from the node's,
``defaultProperties`` those at ksqlDB's default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metastore.engine import overrides
from metastore.engine.overrides import ConfigOverrides

DEFAULTS: Mapping[str, str] = {
    overrides.DEFAULT_KEY_FORMAT: overrides.KSQL_DEFAULT_KEY_FORMAT,
    overrides.PULL_TABLE_SCAN_ENABLED: "true",
    overrides.PULL_RANGE_SCAN_ENABLED: "true",
    overrides.PULL_LIMIT_CLAUSE_ENABLED: "true",
    overrides.PULL_STREAM_ENABLED: "true",
    "ksql.variable.substitution.enable": "true",
    "ksql.streams.auto.offset.reset": "latest",
    "ksql.streams.processing.guarantee": overrides.AT_LEAST_ONCE,
}
"""ksqlDB's defaults of the settings with an effect here (settings whose default is null are
listed only when a request sets them)."""

QUERY_LEVEL = frozenset({
    "auto.offset.reset", "buffered.records.per.partition", "cache.max.bytes.buffering",
    "ksql.fail.on.deserialization.error", "ksql.string.case.config.toggle",
    "ksql.nested.error.set.null", "ksql.query.retry.backoff.max.ms",
    "ksql.query.pull.max.allowed.offset.lag", "ksql.query.pull.table.scan.enabled",
    "ksql.timestamp.throw.on.invalid", "max.task.idle.ms", "task.timeout.ms",
})
"""ksqlDB's ``PropertiesList.QueryLevelProperties``: settings a query may be given."""

MUTABLE_SYSTEM = frozenset({
    "max.poll.records", "max.poll.interval.ms", "session.timeout.ms", "heartbeat.interval.ms",
    "fetch.min.bytes", "fetch.max.bytes", "fetch.max.wait.ms", "metadata.max.age.ms",
    "max.partition.fetch.bytes", "batch.size", "linger.ms", "delivery.timeout.ms",
    "max.request.size", "max.block.ms", "buffer.memory", "compression.type",
    "acceptable.recovery.lag", "commit.interval.ms", "max.warmup.replicas",
    "num.standby.replicas", "poll.ms", "probing.rebalance.interval.ms", "processing.guarantee",
    "window.size.ms",
})
"""ksqlDB's ``PropertiesList.MutableSystemProperties`` (ALTER SYSTEM's allow list)."""

STREAMS_PREFIX = "ksql.streams."


def listed_name(name: str) -> str:
    """The name ksqlDB's ``KsqlConfig`` lists a setting under."""
    if overrides.resolve_name(name) == "streams" and not name.startswith(STREAMS_PREFIX):
        return STREAMS_PREFIX + name
    return name


def _property(name: str, value: str) -> dict[str, Any]:
    """ksqlDB's ``PropertiesList.Property``."""
    bare = name.removeprefix(STREAMS_PREFIX)
    return {"name": name, "scope": "KSQL", "value": value,
            "editable": bare in MUTABLE_SYSTEM or bare in QUERY_LEVEL,
            "level": "QUERY" if name in QUERY_LEVEL else "SERVER"}


def properties_fields(config: ConfigOverrides,
                      server: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The fields of ksqlDB's ``properties`` entity for a request with ``config``, on a node
    whose own settings are ``server``."""
    node = {**DEFAULTS, **(server or {})}
    merged = dict(node)
    for name, value in config.given.items():
        merged[listed_name(name)] = value
    names = sorted(merged)
    return {
        "properties": [_property(name, merged[name]) for name in names],
        "overwrittenProperties": [name for name in names if node.get(name) != merged[name]],
        "defaultProperties": [name for name in names if DEFAULTS.get(name) == merged[name]],
    }
