"""A project's ``ksql-migrations.properties``: ksqlDB's keys, their defaults and checks, where the
migration files are, and the file ``new-project`` writes.

Every key ksqlDB's ``MigrationConfig`` reads is accepted. Basic authentication is supported;
OAuth (``bearer.auth.*``) and TLS key or trust stores (``ssl.*`` with an ``https`` URL) are
refused with a message saying so. An ``https`` URL with no ``ssl.*`` setting is verified against
the system's trusted certificates.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cli.migrations.errors import usage_error
from cli.migrations.properties import load_properties

CONFIG_FILE_NAME = "ksql-migrations.properties"
MIGRATIONS_DIR = "migrations"

SERVER_URL = "ksql.server.url"
BASIC_AUTH_USERNAME = "ksql.auth.basic.username"
BASIC_AUTH_PASSWORD = "ksql.auth.basic.password"
STREAM_NAME = "ksql.migrations.stream.name"
TABLE_NAME = "ksql.migrations.table.name"
STREAM_TOPIC_NAME = "ksql.migrations.stream.topic.name"
TABLE_TOPIC_NAME = "ksql.migrations.table.topic.name"
TOPIC_REPLICAS = "ksql.migrations.topic.replicas"
DIR_OVERRIDE = "ksql.migrations.dir.override"
SSL_ALPN = "ssl.alpn"
SSL_VERIFY_HOST = "ssl.verify.host"
SSL_STORE_KEYS = ("ssl.truststore.location", "ssl.truststore.password", "ssl.keystore.location",
                  "ssl.keystore.password", "ssl.key.password", "ssl.key.alias")
BEARER_KEYS = ("bearer.auth.issuer.endpoint.url", "bearer.auth.client.id",
               "bearer.auth.client.secret", "bearer.auth.scope")
"""The OAuth keys whose value turns OAuth on (the claim names and the token cache's buffer have
defaults and mean nothing alone)."""

DEFAULTS = {STREAM_NAME: "MIGRATION_EVENTS", TABLE_NAME: "MIGRATION_SCHEMA_VERSIONS",
            TOPIC_REPLICAS: "1", SSL_ALPN: "false", SSL_VERIFY_HOST: "true",
            "bearer.auth.scope.claim.name": "scope", "bearer.auth.sub.claim.name": "sub",
            "bearer.auth.cache.expiry.buffer.seconds": "300"}


@dataclass(frozen=True)
class MigrationConfig:
    """The loaded properties of a project; ``path`` is the properties file's."""

    path: Path
    entries: dict[str, str]

    def get(self, key: str) -> str:
        """A key's value, trimmed as Kafka's ConfigDef trims it, or its default ("" if none)."""
        return self.entries.get(key, DEFAULTS.get(key, "")).strip()

    @property
    def server_url(self) -> str:
        return self.get(SERVER_URL).rstrip("/")

    @property
    def stream_name(self) -> str:
        return self.get(STREAM_NAME)

    @property
    def table_name(self) -> str:
        return self.get(TABLE_NAME)

    @property
    def replicas(self) -> int:
        return int(self.get(TOPIC_REPLICAS))

    @property
    def basic_auth(self) -> tuple[str, str] | None:
        username, password = self.get(BASIC_AUTH_USERNAME), self.get(BASIC_AUTH_PASSWORD)
        return (username, password) if username or password else None

    def stream_topic(self, service_id: str) -> str:
        """The stream's topic: as configured, or ``<service id>ksql_<stream name>``."""
        return self.get(STREAM_TOPIC_NAME) or f"{service_id}ksql_{self.stream_name}"

    def table_topic(self, service_id: str) -> str:
        return self.get(TABLE_TOPIC_NAME) or f"{service_id}ksql_{self.table_name}"

    @property
    def migrations_dir(self) -> Path:
        """``ksql.migrations.dir.override``, or ``migrations/`` beside the properties file."""
        override = self.get(DIR_OVERRIDE)
        return Path(override) if override else self.path.parent / MIGRATIONS_DIR


def load_config(path: Path) -> MigrationConfig:
    """The project's properties, checked; a missing or invalid file exits 2."""
    config = MigrationConfig(path, load_properties(path))
    if not config.get(SERVER_URL):
        raise usage_error(f"Missing required property: {SERVER_URL} (in {path})")
    if not config.server_url.lower().startswith(("http://", "https://")):
        raise usage_error(f"Invalid ksql server URL: {config.get(SERVER_URL)} (in {path})")
    _check_int(config, TOPIC_REPLICAS)
    for key in (SSL_ALPN, SSL_VERIFY_HOST):
        _check_boolean(config, key)
    _refuse_unsupported(config)
    return config


def _check_int(config: MigrationConfig, key: str) -> None:
    try:
        int(config.get(key))
    except ValueError:
        raise usage_error(f"Invalid value {config.get(key)} for configuration {key}: "
                          "Not a number of type INT") from None


def _check_boolean(config: MigrationConfig, key: str) -> None:
    if config.get(key).lower() not in ("true", "false"):
        raise usage_error(f"Invalid value {config.get(key)} for configuration {key}: "
                          "Expected value to be either true or false")


def _refuse_unsupported(config: MigrationConfig) -> None:
    oauth = [key for key in BEARER_KEYS if config.get(key)]
    if oauth:
        raise usage_error(f"OAuth authentication ({', '.join(oauth)}) is not supported by "
                          f"metastore migrations; use {BASIC_AUTH_USERNAME} and "
                          f"{BASIC_AUTH_PASSWORD} (in {config.path})")
    if not config.server_url.lower().startswith("https://"):
        return  # as ksqlDB, TLS settings only apply to an https URL
    tls = [key for key in SSL_STORE_KEYS if config.get(key)]
    tls += [SSL_ALPN] if config.get(SSL_ALPN).lower() == "true" else []
    tls += [SSL_VERIFY_HOST] if config.get(SSL_VERIFY_HOST).lower() == "false" else []
    if tls:
        raise usage_error(f"TLS settings ({', '.join(tls)}) are not supported by metastore "
                          "migrations: an https server is verified against the system's trusted "
                          f"certificates; remove them from {config.path}")


_INITIAL_SECTIONS = (
    ("Migrations metadata configs",
     (STREAM_NAME, TABLE_NAME, STREAM_TOPIC_NAME, TABLE_TOPIC_NAME, TOPIC_REPLICAS)),
    ("TLS configs", (*SSL_STORE_KEYS, SSL_ALPN, SSL_VERIFY_HOST)),
    ("ksqlDB server authentication configs", (BASIC_AUTH_USERNAME, BASIC_AUTH_PASSWORD)),
    ("Migrations directory configs", (DIR_OVERRIDE,)),
)
_PLACEHOLDER_SERVICE_ID = "ksql-service-id"
"""The service id ksqlDB's commented-out topic defaults are shown with."""


def initial_properties(server_url: str) -> str:
    """The properties file ``new-project`` writes: the URL, then every other key commented out
    with its default, in ksqlDB's sections."""
    defaults = MigrationConfig(Path(CONFIG_FILE_NAME), {})
    shown = {STREAM_TOPIC_NAME: defaults.stream_topic(_PLACEHOLDER_SERVICE_ID),
             TABLE_TOPIC_NAME: defaults.table_topic(_PLACEHOLDER_SERVICE_ID)}
    lines = [f"{SERVER_URL}={server_url}"]
    for header, keys in _INITIAL_SECTIONS:
        lines += ["", f"# {header}:"]
        lines += [f"# {key}={shown.get(key, defaults.get(key))}" for key in keys]
    return "\n".join(lines) + "\n"
