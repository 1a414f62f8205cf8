"""The migrations metadata on the server, as ksqlDB's tool keeps it: the ``MIGRATION_EVENTS``
stream (one JSON record per state change, in one partition) and the ``MIGRATION_SCHEMA_VERSIONS``
table (a CTAS keeping the latest value of each column per ``version_key``), read with pull queries
on the table and written with INSERT INTO ... VALUES into the stream.

Each state change of a migration writes two records: one keyed ``CURRENT`` (the version being or
last applied) and one keyed by the version. A version's ``previous`` is the version migrated
before it (``<none>`` for the first), which chains the applied versions back to the first.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from cli.migrations.connection import Server
from cli.migrations.errors import MigrationError
from cli.migrations.files import MigrationFile

NONE_VERSION = "<none>"
CURRENT_VERSION_KEY = "CURRENT"
NOT_APPLICABLE = "N/A"
"""The error reason of a migration without error, and every field of a pending one."""
COLUMNS = ("VERSION_KEY", "VERSION", "NAME", "STATE", "CHECKSUM", "STARTED_ON", "COMPLETED_ON",
           "PREVIOUS", "ERROR_REASON")
INFO_COLUMNS = "version, checksum, previous, state, name, started_on, completed_on, error_reason"
log = logging.getLogger("cli.migrations")
VERIFY_TIMEOUT_SECONDS = 30.0
"""How long a version written MIGRATED may take to show in the table (a Spark micro-batch or
more) before the next migration gives up."""


class MigrationState(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    MIGRATED = "MIGRATED"
    ERROR = "ERROR"


def create_stream_sql(name: str, topic: str, replicas: int) -> str:
    return (f"CREATE STREAM {name} (\n"
            "  version_key  STRING KEY,\n  version      STRING,\n  name         STRING,\n"
            "  state        STRING,\n  checksum     STRING,\n  started_on   STRING,\n"
            "  completed_on STRING,\n  previous     STRING,\n  error_reason STRING\n"
            f") WITH (\n  KAFKA_TOPIC={_literal(topic)},\n  VALUE_FORMAT='JSON',\n"
            f"  PARTITIONS=1,\n  REPLICAS={replicas}\n);")


def create_table_sql(table: str, stream: str, topic: str) -> str:
    latest = ",\n".join(f"    latest_by_offset({column}) AS {column}"
                        for column in (c.lower() for c in COLUMNS[1:]))
    return (f"CREATE TABLE {table}\n  WITH (\n    KAFKA_TOPIC={_literal(topic)}\n  )\n"
            f"  AS SELECT\n    version_key,\n{latest}\n  FROM {stream}\n  GROUP BY version_key;")


def initialize(server: Server) -> None:
    """``initialize-metadata``: create the stream, then the table (an existing one is an
    error, as in ksqlDB)."""
    config = server.config
    service_id = server.service_id()
    log.info("Initializing migrations metadata")
    log.info("Creating stream: %s", config.stream_name)
    server.execute(create_stream_sql(config.stream_name, config.stream_topic(service_id),
                                     config.replicas),
                   f"Failed to create stream {config.stream_name}")
    log.info("Creating table: %s", config.table_name)
    server.execute(create_table_sql(config.table_name, config.stream_name,
                                    config.table_topic(service_id)),
                   f"Failed to create table {config.table_name}")
    log.info("Migrations metadata initialized successfully")


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def format_timestamp(epoch_millis: str) -> str:
    """A stored time (epoch milliseconds) as ksqlDB shows it: ``yyyy-MM-dd HH:mm:ss.SSS zone``,
    local time; empty or N/A as stored."""
    try:
        millis = int(epoch_millis)
    except ValueError:
        return epoch_millis
    moment = datetime.fromtimestamp(millis / 1000).astimezone()
    return f"{moment:%Y-%m-%d %H:%M:%S}.{millis % 1000:03d} {moment.tzname()}"


@dataclass(frozen=True)
class VersionInfo:
    """A version's row of the table (or a pending migration's, every field N/A)."""

    version: int
    checksum: str
    previous: str
    state: MigrationState
    name: str
    started_on: str
    completed_on: str
    error_reason: str

    @classmethod
    def from_row(cls, row: list[Any]) -> VersionInfo:
        """From the columns of :data:`INFO_COLUMNS`, in that order."""
        version, checksum, previous, state, name, started, completed, reason = (
            "" if value is None else str(value) for value in row)
        try:
            return cls(int(version), checksum, previous, MigrationState(state), name, started,
                       completed, reason)
        except ValueError as error:
            raise MigrationError(f"Unexpected row in the migrations metadata table: {row}") \
                from error

    @classmethod
    def pending(cls, migration: MigrationFile) -> VersionInfo:
        return cls(migration.version, NOT_APPLICABLE, NOT_APPLICABLE, MigrationState.PENDING,
                   migration.name, NOT_APPLICABLE, NOT_APPLICABLE, NOT_APPLICABLE)

    def as_json(self) -> dict[str, Any]:
        return {"version": self.version, "name": self.name, "state": self.state.value,
                "previousVersion": self.previous, "checksum": self.checksum,
                "startedOn": format_timestamp(self.started_on),
                "completedOn": format_timestamp(self.completed_on),
                "startedOnEpochMs": _millis_or_none(self.started_on),
                "completedOnEpochMs": _millis_or_none(self.completed_on),
                "errorReason": self.error_reason}


def _millis_or_none(stored: str) -> int | None:
    return int(stored) if stored.isdigit() else None


@dataclass(frozen=True)
class StateChange:
    """What one state change of a migration records."""

    migration: MigrationFile
    state: MigrationState
    started_on: str
    completed_on: str
    previous: str
    checksum: str
    error_reason: str = NOT_APPLICABLE


def require_migrated(version: str, info: VersionInfo, next_version: str) -> None:
    """A version another one names as its previous must be MIGRATED."""
    if info.state is not MigrationState.MIGRATED:
        raise MigrationError(
            "Discovered version with previous version that does not have status MIGRATED. "
            f"Version: {next_version}. Previous version: {version}. "
            f"Previous version status: {info.state}")


class MetadataStore:
    """The project's metadata stream and table on its node."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.stream = server.config.stream_name
        self.table = server.config.table_name

    def ensure_initialized(self) -> None:
        """Both exist, or the error says to run initialize-metadata."""
        for kind, name in (("stream", self.stream), ("table", self.table)):
            self.server.execute(
                f"DESCRIBE {name};",
                f"Failed to verify existence of migrations metadata {kind} '{name}'. Did you run "
                "`metastore migrations initialize-metadata`? Error message")

    def current_version(self) -> str:
        """The version of the ``CURRENT`` record, or ``<none>``."""
        rows = self.server.rows(
            f"SELECT version FROM {self.table} WHERE version_key = "
            f"{_literal(CURRENT_VERSION_KEY)};", f"Could not query {self.table}")
        return str(rows[0][0]) if rows else NONE_VERSION

    def info_for(self, version: str) -> VersionInfo | None:
        rows = self.server.rows(
            f"SELECT {INFO_COLUMNS} FROM {self.table} WHERE version_key = {_literal(version)};",
            f"Failed to query state for migration with version {version}")
        return VersionInfo.from_row(rows[0]) if rows else None

    def require_info(self, version: str) -> VersionInfo:
        info = self.info_for(version)
        if info is None:
            raise MigrationError(f"Failed to query state for migration with version {version}: "
                                 "no such migration is present in the migrations metadata table")
        return info

    def infos_for(self, versions: list[int]) -> dict[int, VersionInfo]:
        """The rows of those of ``versions`` that have one, in one multi-key pull query."""
        if not versions:
            return {}
        keys = ", ".join(_literal(str(version)) for version in versions)
        rows = self.server.rows(
            f"SELECT {INFO_COLUMNS} FROM {self.table} WHERE version_key IN ({keys});",
            f"Failed to query state for migration with versions {versions}")
        infos = (VersionInfo.from_row(row) for row in rows)
        return {info.version: info for info in infos}

    def latest_migrated_version(self) -> str:
        """The last version applied: CURRENT's when MIGRATED, else (RUNNING or ERROR) the one
        before it, which must then be MIGRATED; ``<none>`` when there is none."""
        current = self.current_version()
        if current == NONE_VERSION:
            return current
        info = self.require_info(current)
        if info.state is MigrationState.MIGRATED:
            return current
        if info.previous == NONE_VERSION:
            return NONE_VERSION
        require_migrated(info.previous, self.require_info(info.previous), current)
        return info.previous

    def record(self, change: StateChange) -> None:
        """Write ``change`` as the CURRENT record, then as the version's own."""
        migration = change.migration
        for key in (CURRENT_VERSION_KEY, str(migration.version)):
            values = (key, str(migration.version), migration.name, change.state.value,
                      change.checksum, change.started_on, change.completed_on, change.previous,
                      change.error_reason)
            self.server.execute(
                f"INSERT INTO {self.stream} ({', '.join(COLUMNS)}) VALUES "
                f"({', '.join(_literal(value) for value in values)});",
                f"Failed to record state {change.state} of version {migration.version} in "
                f"{self.stream}")

    def wait_until_migrated(self, version: str, timeout: float = VERIFY_TIMEOUT_SECONDS) -> None:
        """Wait until the table shows ``version`` MIGRATED (nothing to wait for ``<none>``)."""
        if version != NONE_VERSION:
            self.wait_for_state(version, MigrationState.MIGRATED, timeout)

    def wait_for_state(self, version: str, state: MigrationState,
                       timeout: float = VERIFY_TIMEOUT_SECONDS) -> None:
        """Wait until the table shows ``version`` in ``state``: the table is a persistent query,
        behind the stream by a micro-batch or more."""
        deadline = time.monotonic() + timeout
        while True:
            info = self.info_for(version)
            if info is not None and info.state is state:
                return
            if time.monotonic() >= deadline:
                found = info.state if info is not None else "no record"
                raise MigrationError(f"Failed to verify status of version {version}: expected "
                                     f"status {state}, got {found} after {timeout:.0f} s")
            time.sleep(0.5)
