"""``apply``: which migrations to apply (``--all``, ``--next``, ``--until``, ``--version``) and
applying each as ksqlDB's ``ApplyMigrationCommand`` does.

A migration is applied once the previous version shows MIGRATED in the table: it is recorded
RUNNING, its statements are parsed (a first pass that only follows DEFINE and UNDEFINE, so that
a file that does not parse runs nothing), then run one by one, and it is recorded MIGRATED, or
ERROR with the reason when a statement fails. Each pass starts with the ``--define`` variables
and no properties: SET, UNSET, DEFINE and UNDEFINE apply to the rest of their file only, and
are kept here, not sent; every other statement is sent, substituted, over ``/ksql`` with the
properties and variables in force. A failed migration is applied again by the next ``apply``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.migrations.errors import MigrationError, usage_error
from cli.migrations.files import (
    MAX_VERSION,
    MigrationFile,
    all_migrations,
    checksum,
    migration_for_version,
    read_contents,
)
from cli.migrations.metadata import NONE_VERSION, MetadataStore, MigrationState, StateChange
from cli.migrations.statements import ParsedCommand, parse_command, split_sql

if TYPE_CHECKING:
    from metastore.sql.variables import Variables

log = logging.getLogger("cli.migrations")


def now_millis() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class ApplyTarget:
    """Exactly one of: every pending migration, the next one, those up to ``until``, or
    ``version`` alone."""

    all: bool = False
    next: bool = False
    until: int | None = None
    version: int | None = None

    def check(self) -> None:
        chosen = [self.all, self.next, self.until is not None, self.version is not None]
        if sum(chosen) != 1:
            raise usage_error("Exactly one of --all, --next, --until or --version is required.")
        for option, value in (("--until", self.until), ("--version", self.version)):
            if value is not None and not 1 <= value <= MAX_VERSION:
                raise usage_error(f"{option} {value} is out of range: a version is between 1 "
                                  f"and {MAX_VERSION}.")


def select_migrations(directory: Path, previous: str, target: ApplyTarget) -> list[MigrationFile]:
    """The migrations ``target`` asks for, after the last migrated version ``previous``."""
    minimum = 1 if previous == NONE_VERSION else int(previous) + 1
    if target.version is not None:
        migration = migration_for_version(target.version, directory)
        if migration is None:
            raise MigrationError(f"No migration file with version {target.version} exists.")
        if target.version < minimum:
            raise MigrationError("Version must be newer than the last version migrated. Last "
                                 f"version migrated was {previous}")
        return [migration]
    eligible = [migration for migration in all_migrations(directory)
                if migration.version >= minimum
                and (target.until is None or migration.version <= target.until)]
    if target.next:
        if not eligible:
            raise MigrationError("No eligible migrations found.")
        return eligible[:1]
    return eligible


@dataclass(frozen=True)
class Outcome:
    migration: MigrationFile
    state: MigrationState

    def as_json(self) -> dict[str, Any]:
        return {"version": self.migration.version, "name": self.migration.name,
                "file": str(self.migration.path), "state": self.state.value}


class Applier:
    """Applies a project's migrations through its metadata store; ``outcomes`` lists each
    migration taken, as it ends (PENDING for a dry run's)."""

    def __init__(self, store: MetadataStore, directory: Path, defines: dict[str, str],
                 dry_run: bool, clock: Callable[[], int] = now_millis) -> None:
        self.store = store
        self.directory = directory
        self.defines = defines
        self.dry_run = dry_run
        self.clock = clock
        self.outcomes: list[Outcome] = []

    def apply(self, target: ApplyTarget) -> None:
        previous = self.store.latest_migrated_version()
        log.info("Loading migration files")
        migrations = select_migrations(self.directory, previous, target)
        if migrations:
            log.info("%d migration file(s) loaded.", len(migrations))
        else:
            log.info("No eligible migrations found.")
        for migration in migrations:
            self._apply_one(migration, previous)
            previous = str(migration.version)
        if migrations and not self.dry_run:
            self.store.wait_until_migrated(previous)

    def _apply_one(self, migration: MigrationFile, previous: str) -> None:
        log.info("Applying migration version %d: %s", migration.version, migration.name)
        contents = read_contents(migration.path)
        log.info("%s contents:\n%s", migration.path, contents)
        if self.dry_run:
            log.info("Dry run complete. No migrations were actually applied.")
            self.outcomes.append(Outcome(migration, MigrationState.PENDING))
            return
        self.store.wait_until_migrated(previous)
        running = StateChange(migration, MigrationState.RUNNING, str(self.clock()), "", previous,
                              checksum(migration.path))
        self.store.record(running)
        try:
            self._run(contents)
        except MigrationError as error:
            self.outcomes.append(Outcome(migration, MigrationState.ERROR))
            self._record_error(replace(running, state=MigrationState.ERROR,
                                       completed_on=str(self.clock()), error_reason=str(error)))
            raise
        self.store.record(replace(running, state=MigrationState.MIGRATED,
                                  completed_on=str(self.clock())))
        self.outcomes.append(Outcome(migration, MigrationState.MIGRATED))
        log.info("Successfully migrated")

    def _record_error(self, change: StateChange) -> None:
        """Record ERROR and wait until the table shows it; a failure to do so is only warned
        of, the migration's own error being the one to report."""
        try:
            self.store.record(change)
            self.store.wait_for_state(str(change.migration.version), MigrationState.ERROR)
        except MigrationError as error:
            log.warning("%s", error)

    def _run(self, contents: str) -> None:
        commands = split_sql(contents)
        self._pass(commands, execute=False)
        self._pass(commands, execute=True)

    def _pass(self, commands: list[str], execute: bool) -> None:
        from metastore.sql.variables import Variables

        variables = Variables(self.defines)
        properties: dict[str, str] = {}
        for command in commands:
            try:
                parsed = parse_command(command, dict(variables.items()))
                self._take(parsed, variables, properties, execute)
            except MigrationError as error:
                action = "execute" if execute else "parse"
                raise MigrationError(f"Failed to {action} sql: {command.strip()}. "
                                     f"Error: {error}") from error

    def _take(self, parsed: ParsedCommand, variables: Variables, properties: dict[str, str],
              execute: bool) -> None:
        """Follow a DEFINE or UNDEFINE; when ``execute``, also keep a SET or UNSET and send
        anything else."""
        from metastore.sql import statements as st

        statement = parsed.statement
        if isinstance(statement, st.DefineVariable):
            variables.define(statement.name, statement.value)
        elif isinstance(statement, st.UndefineVariable):
            variables.undefine(statement.name)
        elif not execute:
            return
        elif isinstance(statement, st.SetProperty) and statement.value is not None:
            properties[statement.name] = statement.value
        elif isinstance(statement, st.SetProperty):  # UNSET
            properties.pop(statement.name, None)
        else:
            self.store.server.execute(parsed.text, properties=properties,
                                      variables=dict(variables.items()))
