"""ksqlDB configuration overrides of a request: which names exist, their values, their effects.

A request may override ksqlDB's configuration: ``streamsProperties`` of ``POST /ksql``, a
``SET 'name' = 'value';`` earlier in the same request, a query test's ``properties``. Following
ksqlDB's ``KsqlConfigResolver``, a name is a ksqlDB setting (``ksql.``), a free-form function
setting (``ksql.functions.``) or a Kafka Streams / client setting (``ksql.streams.`` or no
prefix). A ``ksql.`` name ksqlDB does not define is refused when resolution is strict (REST and
SET); a query test's properties are resolved leniently, as ksqlDB's test driver builds its
config from them without checking names.

Only these settings have an effect here; the others are recognised and accepted without one:

- ``ksql.persistence.default.format.key`` / ``.value``: the formats of a CREATE STREAM/TABLE
  that names none (and the key format of a query whose source's key format is NONE);
- ``ksql.persistence.wrap.single.values``: the ``WRAP_SINGLE_VALUE`` of a source whose value
  is a single column and whose statement does not set it;
- ``ksql.functions.collect_list.limit`` / ``collect_set.limit``: configuration of a persistent
  query, kept on its command and handed to the Spark translation of its functions;
- ``ksql.query.pull.table.scan.enabled`` / ``.range.scan.enabled`` / ``.limit.clause.enabled``
  and ``ksql.query.pull.stream.enabled``: which pull queries ksqlDB accepts (booleans);
- ``metastore.query.real.time`` and ``metastore.query.real.time.batch.ms``: a persistent query
  run in Spark's real-time mode, and the length of its batches (:mod:`metastore.planner.real_time`).

``ksql.functions.substring.legacy.args`` is accepted without effect: ksqlDB removed SUBSTRING's
legacy argument mode and no longer reads it (its tests only ever set it to false, today's mode).

Validation resolves these into the commands it writes (explicit formats, the source's wrapping,
the query's configuration), so replay never depends on a request's overrides. A value that does
not parse is a :class:`ConfigError` (nothing is written).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from metastore.catalog.exceptions import PropertyError
from metastore.formats import rules as formats

DEFAULT_KEY_FORMAT = "ksql.persistence.default.format.key"
DEFAULT_VALUE_FORMAT = "ksql.persistence.default.format.value"
WRAP_SINGLE_VALUES = "ksql.persistence.wrap.single.values"
COLLECT_LIST_LIMIT = "ksql.functions.collect_list.limit"
COLLECT_SET_LIMIT = "ksql.functions.collect_set.limit"
OUTPUT_TOPIC_PREFIX = "ksql.output.topic.name.prefix"
"""Prefixed to the name of a C*AS's sink to name its topic when the statement names none."""

QUERY_SETTINGS = frozenset({COLLECT_LIST_LIMIT, COLLECT_SET_LIMIT})
"""Settings of functions a persistent query runs with (stored on its command, as is
``auto.offset.reset``)."""

PULL_TABLE_SCAN_ENABLED = "ksql.query.pull.table.scan.enabled"
PULL_RANGE_SCAN_ENABLED = "ksql.query.pull.range.scan.enabled"
PULL_LIMIT_CLAUSE_ENABLED = "ksql.query.pull.limit.clause.enabled"
PULL_STREAM_ENABLED = "ksql.query.pull.stream.enabled"
PULL_QUERY_SETTINGS = frozenset({PULL_TABLE_SCAN_ENABLED, PULL_RANGE_SCAN_ENABLED,
                                 PULL_LIMIT_CLAUSE_ENABLED, PULL_STREAM_ENABLED})
"""Switches of ksqlDB's pull queries (all true by default; see metastore.engine.pull_queries)."""

NEW_QUERY_PLANNER = "ksql.new.query.planner.enabled"
"""ksqlDB's newer logical planner (false by default): a projection's key columns keep the
SELECT's order, and a projection may leave the source's key out (its records have no key)."""

FAIL_ON_DESERIALIZATION_ERROR = "ksql.fail.on.deserialization.error"
"""Whether a query fails on a record it cannot deserialize (false: it skips and counts it);
stored with a persistent query."""

REAL_TIME = "metastore.query.real.time"
"""Whether a persistent query runs in Spark's real-time mode (false: micro-batches); stored with
the query."""
REAL_TIME_BATCH_MS = "metastore.query.real.time.batch.ms"
"""How long each batch of a real-time query runs before it checkpoints its offsets; stored with
a real-time query."""
REAL_TIME_BATCH_DEFAULT_MS = 5_000
REAL_TIME_BATCH_RANGE_MS = (5_000, 3_600_000)
"""Spark's shortest real-time batch (``spark.sql.streaming.realTimeMode.minBatchDuration``) and
an hour."""

BOOLEAN_SETTINGS = frozenset({WRAP_SINGLE_VALUES, NEW_QUERY_PLANNER, FAIL_ON_DESERIALIZATION_ERROR,
                              REAL_TIME, *PULL_QUERY_SETTINGS})

KSQL_DEFAULT_KEY_FORMAT = "KAFKA"
"""ksqlDB's default of ``ksql.persistence.default.format.key``."""

DENIED = frozenset({"ksql.service.id"})
"""Settings no request may override (ksqlDB's server denylist always holds the service id)."""

FREE_FORM_PREFIXES = ("ksql.functions.", "ksql.streams.", "ksql.connect.",
                      "ksql.schema.registry.", "ksql.query.pull.thread.pool.size.")
"""``ksql.`` prefixes ksqlDB does not resolve name by name: function settings (free form), Kafka
Streams and client settings, and prefixed groups of settings."""

KSQL_SETTINGS = frozenset({
    "ksql.access.validator.enable", "ksql.admin.request.retry.timeout.ms",
    "ksql.assert.schema.default.timeout.ms", "ksql.assert.topic.default.timeout.ms",
    "ksql.authorization.cache.expiry.time.secs", "ksql.authorization.cache.max.entries",
    "ksql.cast.strings.preserve.nulls", "ksql.client.ip_port.configuration.enabled",
    "ksql.create.or.replace.enabled", "ksql.create.topic.inherit.source.replicas.enabled",
    "ksql.deployment.type", "ksql.endpoint.migrate.query", "ksql.error.classifier.regex",
    "ksql.extension.dir", "ksql.fail.on.deserialization.error", "ksql.fail.on.production.error",
    "ksql.fetch.remote.hosts.max.timeout.seconds", "ksql.headers.columns.enabled",
    "ksql.hidden.topics", "ksql.insert.into.values.enabled", "ksql.internal.metric.collectors",
    "ksql.internal.metrics", "ksql.internal.streams.error.collector",
    "ksql.internal.topic.min.insync.replicas", "ksql.internal.topic.replicas",
    "ksql.json_sr.converter.deserializer.enabled",
    "ksql.kafka.client.additional.config.prefixes", "ksql.lambdas.enabled",
    "ksql.metastore.backup.location", "ksql.metrics.extension", "ksql.metrics.tags.custom",
    "ksql.nested.error.set.null", NEW_QUERY_PLANNER,
    OUTPUT_TOPIC_PREFIX, DEFAULT_KEY_FORMAT, DEFAULT_VALUE_FORMAT,
    WRAP_SINGLE_VALUES, "ksql.persistent.prefix", "ksql.properties.overrides.allowlist",
    "ksql.properties.overrides.denylist", "ksql.properties.overrides.log",
    "ksql.properties.overrides.range.validation.log.enabled",
    "ksql.properties.overrides.validation.mode",
    "ksql.properties.overrides.validation.restore.enabled",
    "ksql.proxy.protocol.local.mode.enabled", "ksql.pull.queries.enable",
    "ksql.query.cleanup.shutdown.timeout.ms", "ksql.query.error.max.queue.size",
    "ksql.query.persistent.active.limit", "ksql.query.persistent.max.bytes.buffering.total",
    "ksql.query.pull.coordinator.queue.capacity", "ksql.query.pull.enable.standby.reads",
    "ksql.query.pull.forwarding.timeout.ms", "ksql.query.pull.interpreter.enabled",
    "ksql.query.pull.limit.clause.enabled", "ksql.query.pull.max.allowed.offset.lag",
    "ksql.query.pull.max.concurrent.requests", "ksql.query.pull.max.hourly.bandwidth.megabytes",
    "ksql.query.pull.max.qps", "ksql.query.pull.metrics.enabled",
    "ksql.query.pull.range.scan.enabled", "ksql.query.pull.router.queue.capacity",
    "ksql.query.pull.router.thread.pool.size", "ksql.query.pull.stream.enabled",
    "ksql.query.pull.table.scan.enabled", "ksql.query.pull.thread.pool.size",
    "ksql.query.push.v2.alos.enabled", "ksql.query.push.v2.catchup.consumer.msg.window",
    "ksql.query.push.v2.continuation.tokens.enabled", "ksql.query.push.v2.enabled",
    "ksql.query.push.v2.interpreter.enabled", "ksql.query.push.v2.latest.reset.age.ms",
    "ksql.query.push.v2.max.catchup.consumers",
    "ksql.query.push.v2.max.hourly.bandwidth.megabytes", "ksql.query.push.v2.metrics.enabled",
    "ksql.query.push.v2.new.latest.delay.ms", "ksql.query.push.v2.registry.installed",
    "ksql.query.retry.backoff.initial.ms", "ksql.query.retry.backoff.max.ms",
    "ksql.query.status.running.threshold.seconds",
    "ksql.query.transient.max.bytes.buffering.total", "ksql.queryanonymizer.cluster_namespace",
    "ksql.queryanonymizer.logs_enabled", "ksql.readonly.topics",
    "ksql.resource.extension.class", "ksql.runtime.feature.shared.enabled",
    "ksql.schema.registry.url", "ksql.security.extension.class", "ksql.service.id",
    "ksql.shared.runtimes.count", "ksql.sink.window.change.log.additional.retention",
    "ksql.source.table.materialization.enabled", "ksql.streams.shutdown.timeout.ms",
    "ksql.suppress.buffer.size.bytes", "ksql.suppress.enabled", "ksql.timestamp.throw.on.invalid",
    "ksql.transient.prefix", "ksql.transient.query.cleanup.service.enable",
    "ksql.transient.query.cleanup.service.initial.delay.seconds",
    "ksql.transient.query.cleanup.service.period.seconds", "ksql.udf.collect.metrics",
    "ksql.udf.enable.security.manager", "ksql.udfs.enabled", "ksql.variable.substitution.enable",
    "ksql.websocket.connection.max.timeout.ms",
})
"""The names of ksqlDB's own settings (its ``KsqlConfig``), which a request may override."""

OFFSET_RESET = frozenset({"auto.offset.reset", "ksql.streams.auto.offset.reset",
                          "ksql.streams.consumer.auto.offset.reset"})
"""The consumer's ``auto.offset.reset``, whose value 'none' ksqlDB refuses."""

OFFSET_RESET_NAME = "auto.offset.reset"
"""The name a persistent query's command stores its ``auto.offset.reset`` under."""
OFFSET_RESET_VALUES = frozenset({"earliest", "latest"})
"""The values of ``auto.offset.reset`` ksqlDB accepts."""

PROCESSING_GUARANTEE = frozenset({"processing.guarantee", "ksql.streams.processing.guarantee"})
"""Kafka Streams' ``processing.guarantee``: how a persistent query delivers its records."""
GUARANTEE_NAME = "processing.guarantee"
"""The name a persistent query's command stores its processing guarantee under."""
AT_LEAST_ONCE = "at_least_once"
"""The default: a micro-batch run again after a failure may write its records again."""
EXACTLY_ONCE = frozenset({"exactly_once", "exactly_once_beta", "exactly_once_v2"})
"""The values that make a query exactly once (Kafka Streams' ``exactly_once_v2``, and the two
older names ksqlDB still accepts for it)."""
GUARANTEES = (AT_LEAST_ONCE, "exactly_once", "exactly_once_beta", "exactly_once_v2")

ConfigValue = str | bool | int | None

_INT_MIN, _INT_MAX = -(2 ** 31), 2 ** 31 - 1
"""ksqlDB parses function limits as Java ints."""


class ConfigError(PropertyError):
    """A configuration override that is unknown, not allowed, or whose value does not parse."""

    code = "config_error"


@dataclass(frozen=True)
class ConfigOverrides:
    """A request's overrides, parsed: ``values`` holds each given setting with an effect here."""

    values: Mapping[str, ConfigValue] = field(default_factory=dict)
    given: Mapping[str, str] = field(default_factory=dict, compare=False)
    """Every override as given (name to its text), with an effect here or not: what SHOW
    PROPERTIES lists (:mod:`metastore.engine.properties`)."""
    defaults: Mapping[str, ConfigValue] = field(default_factory=dict, compare=False)
    """The node's defaults of persistent queries' settings (:meth:`with_defaults`)."""

    @property
    def default_key_format(self) -> str:
        value = self.values.get(DEFAULT_KEY_FORMAT)
        return str(value) if value is not None else KSQL_DEFAULT_KEY_FORMAT

    @property
    def default_value_format(self) -> str | None:
        value = self.values.get(DEFAULT_VALUE_FORMAT)
        return str(value) if value is not None else None

    @property
    def output_topic_prefix(self) -> str:
        value = self.values.get(OUTPUT_TOPIC_PREFIX)
        return value if isinstance(value, str) else ""

    @property
    def wrap_single_values(self) -> bool | None:
        value = self.values.get(WRAP_SINGLE_VALUES)
        return value if isinstance(value, bool) else None

    @property
    def new_query_planner(self) -> bool:
        return self.flag(NEW_QUERY_PLANNER, False)

    def flag(self, name: str, default: bool) -> bool:
        """The boolean setting ``name`` (one of BOOLEAN_SETTINGS), else ``default``."""
        value = self.values.get(name)
        return value if isinstance(value, bool) else default

    def query_config(self) -> tuple[tuple[str, str], ...]:
        """What a persistent query created under these overrides runs with, sorted."""
        settings = {name: str(value) for name, value in self.values.items()
                    if name in QUERY_SETTINGS and value is not None}
        reset = offset_reset(self.values)
        if reset is not None:
            settings[OFFSET_RESET_NAME] = reset
        planner = self.values.get(NEW_QUERY_PLANNER)
        if isinstance(planner, bool):  # the runtime analyses the query as validation did
            settings[NEW_QUERY_PLANNER] = str(planner).lower()
        if self.flag(FAIL_ON_DESERIALIZATION_ERROR, False):
            settings[FAIL_ON_DESERIALIZATION_ERROR] = "true"
        if self.flag(REAL_TIME, False):
            settings[REAL_TIME] = "true"
            settings[REAL_TIME_BATCH_MS] = str(self.values.get(REAL_TIME_BATCH_MS,
                                                               REAL_TIME_BATCH_DEFAULT_MS))
        guarantee = processing_guarantee(self.values) or processing_guarantee(self.defaults)
        if guarantee is not None:
            settings[GUARANTEE_NAME] = guarantee
        return tuple(sorted(settings.items()))

    def with_defaults(self, defaults: Mapping[str, ConfigValue]) -> ConfigOverrides:
        """These overrides over a node's own ``defaults`` of persistent queries' settings (the
        processing guarantee), which apply where the request gives none; the request's own
        values (what SHOW PROPERTIES lists as its, and what a retry is compared by) do not
        change."""
        return replace(self, defaults=dict(defaults))

    def set(self, name: str, value: ConfigValue) -> ConfigOverrides:
        """These overrides after ``SET 'name' = 'value'`` (``UNSET`` when ``value`` is None)."""
        if resolve_name(name) is None:
            raise ConfigError(f"Unknown property: {name[:200]}")
        _check_allowed(name)
        replaced = PROCESSING_GUARANTEE if name in PROCESSING_GUARANTEE else {name}
        values = {k: v for k, v in self.values.items() if k not in replaced}
        given = {k: v for k, v in self.given.items() if k not in replaced}
        if value is not None:
            parsed = parse_value(name, value)
            if parsed is not None:
                values[name] = parsed
            given[name] = given_text(value)
        return ConfigOverrides(values, given, self.defaults)

    def to_json(self) -> dict[str, Any]:
        return {name: self.values[name] for name in sorted(self.values)}


NO_OVERRIDES = ConfigOverrides()


def resolve(properties: Mapping[str, Any] | None, strict: bool = True) -> ConfigOverrides:
    """The overrides of ``properties`` (name to value, as JSON gives them).

    ``strict``: a ``ksql.`` name ksqlDB does not define is an error (ksqlDB's REST API);
    otherwise it is ignored (ksqlDB's query-test driver)."""
    values: dict[str, ConfigValue] = {}
    given: dict[str, str] = {}
    for name in sorted(properties or {}):
        if not isinstance(name, str) or not name.strip():
            raise ConfigError("A configuration override needs a name.")
        if resolve_name(name) is None:
            if strict:
                raise ConfigError(f"Not recognizable as ksql, streams, consumer, or producer "
                                  f"property: '{name[:200]}'")
            continue
        _check_allowed(name)
        raw = properties[name] if properties is not None else None
        if raw is None:
            continue
        parsed = parse_value(name, raw)
        if parsed is not None:
            values[name] = parsed
        given[name] = given_text(raw)
    return ConfigOverrides(values, given)


def given_text(raw: Any) -> str:
    """An override's value as text (JSON's booleans as ksqlDB prints them)."""
    if isinstance(raw, bool):
        return "true" if raw else "false"
    return str(raw)


def resolve_name(name: str) -> str | None:
    """What ``name`` is to ksqlDB: ``"ksql"`` (one of its settings), ``"function"`` (free
    form), ``"streams"`` (a Kafka Streams or client setting), or None when not a setting."""
    if name.startswith("ksql.functions."):
        return "function"
    if name.startswith("ksql.streams.") or not name.startswith("ksql."):
        return "streams"
    if name in KSQL_SETTINGS or name.startswith(FREE_FORM_PREFIXES):
        return "ksql"
    return None


def parse_value(name: str, raw: Any) -> ConfigValue:
    """The value of one setting with an effect here, parsed and checked (None for a setting
    without one: its value is accepted as given)."""
    if name in (DEFAULT_KEY_FORMAT, DEFAULT_VALUE_FORMAT):
        text = _text(name, raw).strip().upper()
        if formats.lookup(text) is None:
            raise ConfigError(f"Invalid value for config '{name}': {_shown(raw)}. Unknown format: "
                              f"{_shown(raw)}")
        return text
    if name in BOOLEAN_SETTINGS:
        if isinstance(raw, bool):
            return raw
        text = raw.strip().lower() if isinstance(raw, str) else ""
        if text not in ("true", "false"):
            raise _coerce_error(name, raw, "Expected value to be either true or false")
        return text == "true"
    if name in QUERY_SETTINGS:
        number: int | None = None
        if isinstance(raw, int) and not isinstance(raw, bool):
            number = raw
        elif isinstance(raw, str) and re.fullmatch(r"\s*[+-]?[0-9]{1,12}\s*", raw):
            number = int(raw)
        if number is None or not _INT_MIN <= number <= _INT_MAX:
            raise _coerce_error(name, raw, "Expected a whole number (a negative one is no limit)")
        return number
    if name == OUTPUT_TOPIC_PREFIX:
        return _text(name, raw)
    if name == REAL_TIME_BATCH_MS:
        return _batch_ms(raw)
    if name in OFFSET_RESET or name in PROCESSING_GUARANTEE:
        return _choice(name, raw)
    return None


def _batch_ms(raw: Any) -> int:
    """A real-time query's batch length, in milliseconds, within :data:`REAL_TIME_BATCH_RANGE_MS`."""
    text = str(raw).strip()
    low, high = REAL_TIME_BATCH_RANGE_MS
    if isinstance(raw, bool) or not re.fullmatch(r"[0-9]{1,12}", text) \
            or not low <= int(text) <= high:
        raise ConfigError(f"Invalid value {_shown(raw)} for configuration {REAL_TIME_BATCH_MS}: "
                          f"Expected milliseconds from {low} to {high}")
    return int(text)


def _choice(name: str, raw: Any) -> str:
    """A Kafka client setting whose ConfigDef is a ValidString: one of its values."""
    if name in PROCESSING_GUARANTEE:
        text = str(raw).strip()
        if text not in GUARANTEES:  # as Kafka Streams' ConfigDef: the exact names
            raise ConfigError(f"Invalid value {_shown(raw)} for configuration "
                              f"processing.guarantee: String must be one of: "
                              f"{', '.join(GUARANTEES)}")
        return text
    text = str(raw).strip()
    if text.lower() == "none":
        raise ConfigError("'none' is not valid for this property within KSQL")
    if text not in OFFSET_RESET_VALUES:
        raise ConfigError(f"Invalid value {_shown(raw)} for configuration auto.offset.reset: "
                          "String must be one of: latest, earliest, none")
    return text


def processing_guarantee(values: Mapping[str, object]) -> str | None:
    """The processing guarantee ``values`` (a request's overrides, or a persistent query's
    settings) give under any of its names (given under several, the first in name order)."""
    for name in sorted(PROCESSING_GUARANTEE):
        value = values.get(name)
        if isinstance(value, str) and value in GUARANTEES:
            return value
    return None


def exactly_once(query_config: Mapping[str, object]) -> bool:
    """Whether a persistent query's settings say it runs exactly once."""
    return processing_guarantee(query_config) in EXACTLY_ONCE


def real_time_batch_ms(query_config: Mapping[str, object]) -> int | None:
    """How long each batch of a persistent query in real-time mode runs (its settings,
    :meth:`ConfigOverrides.query_config`), or None when it runs in micro-batches."""
    if query_config.get(REAL_TIME) != "true":
        return None
    return int(str(query_config.get(REAL_TIME_BATCH_MS, REAL_TIME_BATCH_DEFAULT_MS)))


def new_query_planner(query_config: Mapping[str, object]) -> bool:
    """Whether a persistent query's settings (:meth:`ConfigOverrides.query_config`) say it was
    analysed under ksqlDB's newer planner."""
    return query_config.get(NEW_QUERY_PLANNER) == "true"


def fails_on_deserialization_error(values: Mapping[str, object]) -> bool:
    """Whether a query fails on a record it cannot deserialize (ksqlDB's
    ``ksql.fail.on.deserialization.error``, false by default: the record is skipped)."""
    return str(values.get(FAIL_ON_DESERIALIZATION_ERROR, "false")).strip().lower() == "true"


def offset_reset(values: Mapping[str, object]) -> str | None:
    """Where a query starts reading its sources, 'earliest' or 'latest', when ``values`` (a
    request's overrides, or a persistent query's settings) say, under any of the names (given
    under several, the first in name order)."""
    for name in sorted(OFFSET_RESET):
        value = values.get(name)
        if value in OFFSET_RESET_VALUES:
            return str(value)
    return None


def _check_allowed(name: str) -> None:
    if name in DENIED:
        raise ConfigError("One or more properties overrides set locally are prohibited by the "
                          f"KSQL server denylist (use UNSET to reset their default value): [{name}]")


def _text(name: str, raw: Any) -> str:
    if isinstance(raw, str):
        return raw
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        return str(raw)
    raise _coerce_error(name, raw, "Expected a string")


def _shown(raw: Any) -> str:
    text = str(raw).lower() if isinstance(raw, bool) else str(raw)
    return text[:100]


def _coerce_error(name: str, raw: Any, reason: str) -> ConfigError:
    return ConfigError(f"Failed to coerce type of value '{_shown(raw)}' for key '{name}': {reason}")
