"""How a node process is configured: one frozen value, built from named settings.

:func:`server_settings` takes the settings by name (``bootstrap_servers``, ``spark_master``, the
``kafka`` / ``limits`` / ``http_limits`` tables, ...), as the TOML config file spells them and as
``metastore server`` collects them from its options and environment variables, and fills in
what is missing from the defaults of the dataclasses (``NodeConfig``, ``WriterOptions``,
``CheckpointPolicy``, ``RequestLimits``, ``HttpLimits``, :class:`SparkSettings`): those defaults
are the only ones. Bad values raise :class:`SettingsError` naming the setting.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from metastore.checkpoint.checkpointer import CheckpointPolicy
from metastore.connect.settings import PREFIX as CONNECT_PREFIX
from metastore.connect.settings import ConnectSettings, ConnectSettingsError, connect_settings
from metastore.core.exceptions import MetastoreError, PropertyValueError
from metastore.core.faults import NO_FAULTS, Faults
from metastore.core.limits import RequestLimits
from metastore.dev.paths import dev_dir
from metastore.engine import overrides
from metastore.jvm import classes
from metastore.log.writer import WriterOptions
from metastore.runtime import error_types, query_health
from metastore.runtime.error_types import ErrorClassifier, ErrorClassifierSettingError
from metastore.runtime.processing_log_settings import (
    ProcessingLogSettingError,
    ProcessingLogSettings,
)
from metastore.runtime.query_health import RetrySettingError, RetrySettings
from metastore.server.acl_validator import PROPERTIES as ACCESS_VALIDATOR
from metastore.server.acl_validator import AccessValidatorSettings
from metastore.server.http.forwarding import ForwardingSettings
from metastore.server.http.http_limits import HttpLimits
from metastore.server.node import NodeConfig
from metastore.server.peer_certificates import MAPPING_RULES, PrincipalRule, parse_rules
from metastore.server.roles import RoleFile, RoleFileError
from metastore.server.tls import PREFIX as TLS_PREFIX
from metastore.server.tls import TlsSettingError, TlsSettings

DEFAULT_LISTEN = "127.0.0.1:8088"
DEFAULT_SERVICE_ID = "default_"
"""ksqlDB's default ``ksql.service.id``."""


class SettingsError(MetastoreError):
    """A setting with a value the node cannot use; ``setting`` names it."""

    code = "bad_setting"

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(f"{setting}: {message}")
        self.setting = setting


@dataclass(frozen=True)
class SparkSettings:
    """How a node runs Spark: the master, its catalog, and its persistent queries."""

    master: str = "local[1]"
    persistent_catalog: bool = True
    """Spark's Hive catalog in the data directory, kept across restarts (else in memory)."""
    query_checkpoints: str | None = None
    """Root of the queries' Spark checkpoints, a directory or a Hadoop file system URI (default
    ``<data dir>/query-checkpoints``); shared between nodes, so one can take a query over, and
    with the Spark workers (:mod:`metastore.runtime.checkpoints`)."""
    query_session_timeout_ms: int = 10_000
    """How long a node that stopped answering keeps its queries before the group moves them."""
    conf: Mapping[str, str] = field(default_factory=dict)
    """Spark settings of the node's application (``spark.*``), over the node's own defaults:
    executors' size on a cluster, the driver's address, the UI..."""


@dataclass(frozen=True)
class ServerSettings:
    """Everything one ``metastore server`` process is built from."""

    node: NodeConfig
    directory: Path
    """The node's own directory: checkpoints (when on), the Spark warehouse and catalog."""
    host: str = "127.0.0.1"
    port: int = 8088
    spark: SparkSettings | None = field(default_factory=SparkSettings)
    """None: the node runs without Spark (no catalog projection, pull or persistent queries)."""
    http: HttpLimits = field(default_factory=HttpLimits)
    auth_file: Path | None = None
    """``user:password`` lines; basic auth on every endpoint but /healthcheck when set."""
    function_modules: tuple[str, ...] = ()
    """Python modules of user-defined functions the node loads before it replays the command
    log (:mod:`metastore.functions.extensions`); every node of a service must load the same."""
    forwarding: ForwardingSettings = field(default_factory=ForwardingSettings)
    """Whether (and how long) write requests go to the service's current writer."""
    processing_log: ProcessingLogSettings = field(default_factory=ProcessingLogSettings)
    """ksqlDB's ``ksql.logging.processing.*`` properties (:mod:`metastore.runtime.
    processing_log`)."""
    query_retry: RetrySettings = field(default_factory=RetrySettings)
    """ksqlDB's ``ksql.query.retry.backoff.*`` and ``ksql.query.error.max.queue.size``
    (:mod:`metastore.runtime.query_health`)."""
    sink_producer: Mapping[str, str] = field(default_factory=dict)
    """ksqlDB's ``ksql.streams.producer.*``: settings of every persistent query's sink
    producer, as Spark's Kafka sink options (``kafka.max.block.ms``)."""
    error_classifier: ErrorClassifier = field(default_factory=ErrorClassifier)
    """ksqlDB's ``ksql.error.classifier.regex.*``: the operator's types of query errors
    (:mod:`metastore.runtime.error_types`)."""

    advertised_url: str | None = None
    """The URL other nodes and clients reach this node at (heartbeats, forwarded writes,
    /clusterStatus); None: ``http://<host>:<port>`` of the listen address."""
    queries_file: Path | None = None
    """Headless mode's file of statements (ksqlDB's ``ksql.queries.file``): written to the log
    once, and no statement or query served (:mod:`metastore.server.headless`)."""
    tls: TlsSettings | None = None
    """The REST listener's TLS, from ksqlDB's ``ssl.*`` properties (:mod:`metastore.server.
    tls`); None: plain HTTP."""
    certificate_users: tuple[PrincipalRule, ...] | None = None
    """Users known by their client certificate, mapped by these rules
    (:mod:`metastore.server.peer_certificates`); None: by ``--auth-file``, or none."""

    @property
    def url(self) -> str:
        if self.advertised_url:
            return self.advertised_url.rstrip("/")
        host = f"[{self.host}]" if ":" in self.host and not self.host.startswith("[") else self.host
        return f"{'https' if self.tls is not None else 'http'}://{host}:{self.port}"

    @property
    def query_checkpoints(self) -> str:
        chosen = self.spark.query_checkpoints if self.spark is not None else None
        return chosen or str(self.directory / "query-checkpoints")


def server_settings(values: Mapping[str, Any], faults: Faults = NO_FAULTS) -> ServerSettings:
    """The settings named in ``values`` (absent or None: the default)."""
    given = {name: value for name, value in values.items() if value is not None}
    unknown = sorted(set(given) - _KNOWN)
    if unknown:
        raise SettingsError(unknown[0], f"unknown setting; known: {', '.join(sorted(_KNOWN))}")
    bootstrap = given.get("bootstrap_servers")
    if not bootstrap:
        raise SettingsError("bootstrap_servers", "no Kafka given (pass --bootstrap-servers or "
                            "set KAFKA_BOOTSTRAP_SERVERS; start a local one with: metastore dev "
                            "kafka start)")
    host, port = _listen(str(given.get("listen", DEFAULT_LISTEN)))
    node_id = str(given.get("node_id") or f"{socket.gethostname()}-{port}")
    directory = Path(given.get("data_dir") or dev_dir() / "nodes" / node_id)
    checkpoint, checkpoints_on = _checkpoints(given)
    tls = _tls(given)
    certificate_users = _certificate_users(given, tls)
    users_known = bool(given.get("auth_file")) or certificate_users is not None
    node = NodeConfig(
        service_id=str(given.get("service_id", DEFAULT_SERVICE_ID)),
        bootstrap_servers=str(bootstrap), node_id=node_id,
        kafka_client={str(k): str(v) for k, v in _table(given, "kafka").items()},
        data_dir=directory if checkpoints_on else None, checkpoint=checkpoint,
        writer=_writer(given), limits=_limits(_table(given, "limits")), faults=faults,
        schema_registry_url=_registry_url(given.get("schema_registry_url")),
        query_defaults=_query_defaults(given), connect=_connect(given),
        roles=_roles(given, users_known), access_validator=_access_validator(given, users_known),
        **_pick(given, {"read_timeout": float, "fetch_wait_ms": int, "snapshots": _boolean}))
    try:
        http = HttpLimits.from_settings(_table(given, "http_limits"))
    except ValueError as error:
        raise SettingsError("http_limits", str(error)) from error
    auth = given.get("auth_file")
    advertised = _advertised(given.get("advertised_url"))
    if tls is not None and advertised is not None and not advertised.startswith("https://"):
        raise SettingsError("advertised_url", "the node serves HTTPS (ssl.keystore.location): "
                            f"advertise an https:// URL; got {advertised!r}")
    return ServerSettings(node=node, directory=directory, host=host, port=port,
                          spark=_spark(given), http=http,
                          auth_file=Path(auth) if auth else None,
                          function_modules=_modules(given.get("function_modules", ())),
                          forwarding=_forwarding(given),
                          processing_log=_processing_log(given),
                          query_retry=_query_retry(given),
                          error_classifier=_error_classifier(given),
                          sink_producer=_sink_producer(given),
                          advertised_url=advertised, queries_file=_queries_file(given),
                          tls=tls, certificate_users=certificate_users)


def _roles(given: Mapping[str, Any], users_known: bool) -> RoleFile | None:
    chosen = given.get("roles_file")
    if not chosen:
        return None
    if not users_known:
        raise SettingsError("roles_file", "it names users, so it needs --auth-file or client "
                            "certificates (ssl.client.authentication): the users a request "
                            "is authenticated as")
    try:
        return RoleFile.load(Path(str(chosen)))
    except RoleFileError as error:
        raise SettingsError("roles_file", str(error)) from error


def _access_validator(given: Mapping[str, Any], users_known: bool) -> AccessValidatorSettings:
    try:
        return AccessValidatorSettings.of(_ksql_properties(given), users_known)
    except PropertyValueError as error:
        raise SettingsError("ksql_properties", str(error)) from error


def _certificate_users(given: Mapping[str, Any],
                       tls: TlsSettings | None) -> tuple[PrincipalRule, ...] | None:
    """The principal mapping rules when users are known by their client certificate: over TLS
    that asks for one, without an auth file (whose users come first)."""
    rules = _ksql_properties(given).get(MAPPING_RULES)
    asks = tls is not None and tls.client_authentication != "NONE"
    if not asks or given.get("auth_file"):
        if rules is not None:
            raise SettingsError("ksql_properties", f"{MAPPING_RULES} maps client certificates "
                                "to users: it needs ssl.client.authentication (REQUIRED or "
                                "REQUESTED) and no --auth-file")
        return None
    try:
        return parse_rules(rules or "DEFAULT")
    except PropertyValueError as error:
        raise SettingsError("ksql_properties", str(error)) from error


def _tls(given: Mapping[str, Any]) -> TlsSettings | None:
    try:
        return TlsSettings.of(_ksql_properties(given))
    except TlsSettingError as error:
        raise SettingsError("ksql_properties", str(error)) from error


def _registry_url(value: Any) -> str | None:
    if value is None or value == "":
        return None
    url = str(value).rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingsError("schema_registry_url", "it is not an http:// or https:// URL")
    return url


def _advertised(value: Any) -> str | None:
    if value is None:
        return None
    url = str(value).strip()
    parsed = urlsplit(url)
    wrong = SettingsError("advertised_url", f"expected http(s)://HOST:PORT (a port, and no "
                                            f"user or path); got {url!r}")
    if parsed.scheme not in ("http", "https") or not parsed.hostname or parsed.path not in (
            "", "/") or parsed.query or parsed.fragment or "@" in parsed.netloc:
        raise wrong  # heartbeats publish it: no credentials; other nodes need its port
    try:
        if parsed.port is None:
            raise wrong
    except ValueError as error:
        raise wrong from error
    return url


QUERY_DEFAULTS = frozenset({"ksql.streams.processing.guarantee"})
"""The ``ksql_properties`` that set the node's defaults of persistent queries' settings."""
QUERY_RETRY = frozenset(query_health.PROPERTIES)
"""The ``ksql_properties`` of a failed query's errors and retries; the others are the
processing log's."""


QUERIES_FILE_PROPERTY = "ksql.queries.file"
"""ksqlDB's property of headless mode's file (``queries_file`` wins, as ``--queries-file``)."""


def _queries_file(given: Mapping[str, Any]) -> Path | None:
    chosen = given.get("queries_file") or _ksql_properties(given).get(QUERIES_FILE_PROPERTY)
    if not chosen:
        return None
    path = Path(str(chosen))
    if not path.is_file():
        raise SettingsError("queries_file", f"{path} is not a file")
    return path


def _connect(given: Mapping[str, Any]) -> ConnectSettings:
    try:
        return connect_settings(given.get("connect_url"), _ksql_properties(given))
    except ConnectSettingsError as error:
        raise SettingsError("connect_url", str(error)) from error


def _ksql_properties(given: Mapping[str, Any]) -> dict[str, str]:
    """The ``ksql_properties`` table (TOML booleans as ksqlDB writes them)."""
    return {str(name): str(value).lower() if isinstance(value, bool) else str(value)
            for name, value in _table(given, "ksql_properties").items()}


def _processing_log(given: Mapping[str, Any]) -> ProcessingLogSettings:
    properties = {name: value for name, value in _ksql_properties(given).items()
                  if name not in QUERY_DEFAULTS | QUERY_RETRY | ACCESS_VALIDATOR
                  and name != QUERIES_FILE_PROPERTY
                  and not name.startswith((CONNECT_PREFIX, TLS_PREFIX))
                  and not name.startswith((error_types.REGEX_PREFIX, SINK_PRODUCER_PREFIX))}
    try:
        return ProcessingLogSettings.of(properties)
    except ProcessingLogSettingError as error:
        raise SettingsError("ksql_properties", str(error)) from error


def _query_retry(given: Mapping[str, Any]) -> RetrySettings:
    properties = {name: value for name, value in _ksql_properties(given).items()
                  if name in QUERY_RETRY}
    try:
        return RetrySettings.of(properties)
    except RetrySettingError as error:
        raise SettingsError("ksql_properties", str(error)) from error


SINK_PRODUCER_PREFIX = "ksql.streams.producer."
OWNED_PRODUCER_SETTINGS = frozenset({"bootstrap.servers", "key.serializer", "value.serializer",
                                     "transactional.id", "interceptor.classes",
                                     "partitioner.class", "enable.idempotence"})
"""Settings a query's sink producer has from the node and its guarantee, whatever is asked."""


def _sink_producer(given: Mapping[str, Any]) -> dict[str, str]:
    chosen: dict[str, str] = {}
    for name, value in _ksql_properties(given).items():
        setting = name.removeprefix(SINK_PRODUCER_PREFIX)
        if setting == name:
            continue
        if not setting or setting in OWNED_PRODUCER_SETTINGS or not value.strip():
            raise SettingsError("ksql_properties", f"{name}: a query's sink producer takes no "
                                f"{setting or 'unnamed'} setting of {value!r}")
        chosen[f"kafka.{setting}"] = value.strip()
    return chosen


def _error_classifier(given: Mapping[str, Any]) -> ErrorClassifier:
    try:
        return ErrorClassifier.of(_ksql_properties(given))
    except ErrorClassifierSettingError as error:
        raise SettingsError("ksql_properties", str(error)) from error


def _query_defaults(given: Mapping[str, Any]) -> dict[str, str]:
    """The node's defaults of persistent queries' settings, checked as a request's are."""
    defaults = {name: value for name, value in _ksql_properties(given).items()
                if name in QUERY_DEFAULTS}
    try:
        return {name: str(overrides.parse_value(name, value)) for name, value in defaults.items()}
    except overrides.ConfigError as error:
        raise SettingsError("ksql_properties", str(error)) from error


def _forwarding(given: Mapping[str, Any]) -> ForwardingSettings:
    picked = _pick(given, {"write_forwarding": _boolean, "forward_timeout_seconds": float},
                   {"write_forwarding": "enabled", "forward_timeout_seconds": "timeout"})
    if not 0.1 <= picked.get("timeout", 1.0) <= 300:
        raise SettingsError("forward_timeout_seconds", "must be between 0.1 and 300")
    return ForwardingSettings(**picked)


_KNOWN = frozenset({
    "bootstrap_servers", "service_id", "node_id", "listen", "data_dir", "kafka", "spark_master",
    "spark_conf",
    "spark_catalog", "query_checkpoint_dir", "query_session_timeout_ms", "request_timeout",
    "read_timeout", "fetch_wait_ms", "writer_mode", "write_batch_max_requests",
    "write_batch_linger_ms", "write_forwarding", "forward_timeout_seconds", "advertised_url",
    "checkpoint_every_records",
    "checkpoint_every_seconds", "snapshots", "limits", "http_limits", "auth_file", "roles_file",
    "function_modules", "schema_registry_url", "ksql_properties", "queries_file", "connect_url",
})


def _modules(value: Any) -> tuple[str, ...]:
    """``function_modules``: a list of importable module names (one name alone too)."""
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list | tuple) or not all(
            isinstance(n, str) and n.strip() for n in names):
        raise SettingsError("function_modules", "expected a list of Python module names")
    return tuple(dict.fromkeys(n.strip() for n in names))


def _listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise SettingsError("listen", f"expected HOST:PORT, e.g. {DEFAULT_LISTEN}; got {listen!r}")
    return host or "127.0.0.1", int(port)


def _table(given: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    table = given.get(name, {})
    if not isinstance(table, Mapping):
        raise SettingsError(name, "expected a table of NAME = value")
    return table


def _convert(given: Mapping[str, Any], name: str, kind: Callable[[Any], Any]) -> Any:
    try:
        return kind(given[name])
    except (TypeError, ValueError) as error:
        raise SettingsError(name, f"invalid value {given[name]!r}") from error


def _pick(given: Mapping[str, Any], converters: Mapping[str, Callable[[Any], Any]],
          rename: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The given settings among ``converters``, converted, under their field names."""
    return {(rename or {}).get(name, name): _convert(given, name, kind)
            for name, kind in converters.items() if name in given}


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false", "1", "0", "yes", "no"):
        raise ValueError(text)
    return text in ("true", "1", "yes")


def _writer(given: Mapping[str, Any]) -> WriterOptions:
    mode = given.get("writer_mode", "reuse")
    if mode not in ("reuse", "per-statement"):
        raise SettingsError("writer_mode", "must be 'reuse' or 'per-statement'")
    picked = _pick(given, {"request_timeout": float, "write_batch_max_requests": int,
                           "write_batch_linger_ms": float},
                   {"write_batch_max_requests": "max_batch_requests",
                    "write_batch_linger_ms": "batch_linger_ms"})
    if not 1 <= picked.get("max_batch_requests", 1) <= 1000:
        raise SettingsError("write_batch_max_requests", "must be between 1 and 1000")
    if not 0 <= picked.get("batch_linger_ms", 0) <= 1000:
        raise SettingsError("write_batch_linger_ms", "must be between 0 and 1000")
    if mode == "per-statement":  # ksqlDB's way: each request a transaction of its own
        if picked.get("max_batch_requests", 1) != 1:
            raise SettingsError("write_batch_max_requests", "writer_mode 'per-statement' "
                                "writes each request in a transaction of its own")
        picked["max_batch_requests"] = 1
    return WriterOptions(reuse_producer=mode == "reuse", **picked)


def _checkpoints(given: Mapping[str, Any]) -> tuple[CheckpointPolicy, bool]:
    """The policy, and whether checkpoints are on (``checkpoint_every_records`` 0 turns off)."""
    picked = _pick(given, {"checkpoint_every_records": int, "checkpoint_every_seconds": float},
                   {"checkpoint_every_records": "every_records",
                    "checkpoint_every_seconds": "every_seconds"})
    records = picked.get("every_records")
    if records is not None and records < 0:
        raise SettingsError("checkpoint_every_records", "must be 0 or more")
    if records == 0:
        return CheckpointPolicy(), False
    return CheckpointPolicy(**picked), True


def _limits(values: Mapping[str, Any]) -> RequestLimits:
    known = {spec.name for spec in fields(RequestLimits)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise SettingsError("limits", f"unknown limit(s) {', '.join(unknown)}; known: "
                            f"{', '.join(sorted(known))}")
    try:
        return RequestLimits(**{name: int(value) for name, value in values.items()})
    except ValueError as error:
        raise SettingsError("limits", str(error)) from error


def _spark(given: Mapping[str, Any]) -> SparkSettings | None:
    master = str(given.get("spark_master", SparkSettings.master))
    if master == "none":
        return None
    catalog = given.get("spark_catalog", "persistent")
    if catalog not in ("persistent", "in-memory"):
        raise SettingsError("spark_catalog", "must be 'persistent' or 'in-memory'")
    checkpoints = given.get("query_checkpoint_dir")
    conf = _flat(_table(given, "spark_conf"))
    for key in conf:
        if not key.startswith("spark."):
            raise SettingsError("spark_conf", f"{key}: a Spark setting starts with 'spark.'")
        if key in _SPARK_CONF_OWNED:
            raise SettingsError("spark_conf", f"{key}: the node sets it itself (and "
                                f"{', '.join(sorted(_SPARK_CONF_OWNED - {key}))})")
    return SparkSettings(master=master, persistent_catalog=catalog == "persistent",
                         query_checkpoints=str(checkpoints) if checkpoints else None, conf=conf,
                         **_pick(given, {"query_session_timeout_ms": int}))


def _flat(table: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Dotted names of a TOML table: ``spark.executor.memory = "1g"`` is a nested table there."""
    flat: dict[str, str] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flat(value, f"{name}."))
        else:
            flat[name] = str(value)
    return flat


_SPARK_CONF_OWNED = frozenset({"spark.master", "spark.app.name", "spark.jars",
                               "spark.sql.catalogImplementation", "spark.sql.warehouse.dir",
                               "spark.sql.session.timeZone",
                               f"spark.sql.catalog.{classes.SQL_FUNCTIONS_CATALOG}"})
"""What the node decides: its master (``spark_master``), its name, its jars, its catalog, the
time zone ksqlDB's semantics need and the catalog of its own SQL functions."""
