"""The ``metastore migrations`` command group: ksqlDB's ``ksql-migrations`` commands, their
options, their output (progress on stdout, or stderr with ``--json``; warnings and errors on
stderr) and their exit codes (0 success; 1 a failed migration, validation or statement; 2 a
usage error or an unreachable server)."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from cli.migrations import files, metadata
from cli.migrations.apply import Applier, ApplyTarget
from cli.migrations.config import MigrationConfig, load_config
from cli.migrations.connection import Server, load_headers
from cli.migrations.destroy import destroy_metadata as destroy
from cli.migrations.errors import MigrationError, usage_error
from cli.migrations.metadata import MetadataStore, VersionInfo
from cli.migrations.statements import parse_defines
from cli.migrations.validation import validate as validate_chain
from cli.output import print_json, print_table

app = typer.Typer(help="Schema migrations, as ksqlDB's ksql-migrations tool: versioned files of "
                       "statements applied in order and recorded in a stream and table on the "
                       "server.", no_args_is_help=True)

ConfigFile = Annotated[Path | None, typer.Option(
    "--config-file", "-c", help="The project's ksql-migrations.properties (required by every "
    "command but new-project); also accepted before the command.")]
Json = Annotated[bool, typer.Option("--json", help="Print JSON.")]
log = logging.getLogger("cli.migrations")


@app.callback()
def migrations(ctx: typer.Context, config_file: ConfigFile = None) -> None:
    """Manage a project of migration files and apply them to a node."""
    ctx.obj = config_file


class _Levels(logging.Filter):
    def __init__(self, warnings: bool) -> None:
        super().__init__()
        self.warnings = warnings

    def filter(self, record: logging.LogRecord) -> bool:
        return (record.levelno >= logging.WARNING) == self.warnings


def _configure_logging(json_output: bool) -> None:
    log.handlers.clear()
    log.setLevel(logging.INFO)
    log.propagate = False
    progress = logging.StreamHandler(sys.stderr if json_output else sys.stdout)
    progress.addFilter(_Levels(warnings=False))
    warnings = logging.StreamHandler(sys.stderr)
    warnings.addFilter(_Levels(warnings=True))
    warnings.setFormatter(logging.Formatter("Warning: %(message)s"))
    log.addHandler(progress)
    log.addHandler(warnings)


@contextlib.contextmanager
def _reported(json_output: bool = False) -> Iterator[None]:
    """Print a MigrationError and exit with its code."""
    _configure_logging(json_output)
    try:
        yield
    except MigrationError as error:
        typer.echo(f"Error: {error}", err=True)
        raise typer.Exit(error.exit_code) from error


def _config(ctx: typer.Context, config_file: Path | None) -> MigrationConfig:
    given = [path for path in (ctx.obj, config_file) if path is not None]
    if len(given) > 1:
        raise usage_error("Pass --config-file once (before or after the command).")
    if not given:
        raise usage_error("Migrations config file required but not specified. Specify with "
                          "--config-file (or, equivalently, -c).")
    return load_config(given[0])


@contextlib.contextmanager
def _initialized(config: MigrationConfig, headers: dict[str, str] | None = None
                 ) -> Iterator[MetadataStore]:
    """The metadata of ``config``'s node, which must be initialized; the connection closes
    after."""
    with Server(config, headers) as server:
        store = MetadataStore(server)
        store.ensure_initialized()
        yield store


@app.command("new-project")
def new_project(ctx: typer.Context,
                project_path: Annotated[Path, typer.Argument(
                    help="The project's root directory (created if missing).")],
                server_url: Annotated[str, typer.Argument(
                    help="The node's URL, e.g. http://localhost:8088.")],
                config_file: ConfigFile = None) -> None:
    """Create a project: its directory, migrations/ and ksql-migrations.properties."""
    with _reported():
        if ctx.obj is not None or config_file is not None:
            raise usage_error("This command does not expect a config file to be passed. Rather, "
                              "this command will create one as part of preparing the "
                              "migrations directory.")
        files.new_project(project_path, server_url)


@app.command("initialize-metadata")
def initialize_metadata(ctx: typer.Context, config_file: ConfigFile = None) -> None:
    """Create the metadata stream and table on the node."""
    with _reported(), Server(_config(ctx, config_file)) as server:
        metadata.initialize(server)


@app.command()
def create(ctx: typer.Context,
           description: Annotated[str, typer.Argument(
               help="What the migration does; blanks and / \\ : * ? \" < > | become '_'.")],
           version: Annotated[int | None, typer.Option(
               "--version", "-v", help="Its version (default: the latest file's + 1).")] = None,
           config_file: ConfigFile = None, json_output: Json = False) -> None:
    """Create an empty migration file, V<version>__<description>.sql."""
    with _reported(json_output):
        config = _config(ctx, config_file)
        created = files.create_migration(config.migrations_dir, description, version)
        if json_output:
            print_json({"version": created.version, "name": created.name,
                        "file": str(created.path)})


@app.command()
def apply(ctx: typer.Context,
          all_: Annotated[bool, typer.Option("--all", "-a",
                                             help="Apply every pending migration.")] = False,
          next_: Annotated[bool, typer.Option("--next", "-n",
                                              help="Apply the next pending migration.")] = False,
          until: Annotated[int | None, typer.Option(
              "--until", "-u", help="Apply the pending migrations up to this version.")] = None,
          version: Annotated[int | None, typer.Option(
              "--version", "-v", help="Apply this version only (newer than the last).")] = None,
          dry_run: Annotated[bool, typer.Option(
              "--dry-run", help="Show the files and statements; send nothing.")] = False,
          define: Annotated[list[str] | None, typer.Option(
              "--define", "-d", help="A variable NAME=VALUE for every file (repeatable).")] = None,
          headers: Annotated[Path | None, typer.Option(
              "--headers", help="A file of 'Name: value' HTTP headers for every request.")] = None,
          config_file: ConfigFile = None, json_output: Json = False) -> None:
    """Apply migrations, in version order, after the last one migrated."""
    target = ApplyTarget(all_, next_, until, version)
    with _reported(json_output):
        config = _config(ctx, config_file)
        target.check()
        defines = parse_defines(define)
        with _initialized(config, load_headers(headers)) as store:
            if dry_run:
                log.info("This is a dry run. No ksqlDB statements will be submitted to the "
                         "ksqlDB server.")
            _validate_before_apply(store, config)
            applier = Applier(store, config.migrations_dir, defines, dry_run)
            try:
                applier.apply(target)
            finally:
                if json_output:
                    print_json({"dryRun": dry_run,
                                "migrations": [o.as_json() for o in applier.outcomes]})


def _validate_before_apply(store: MetadataStore, config: MigrationConfig) -> None:
    log.info("Validating current migration state before applying new migrations")
    result = validate_chain(store, config.migrations_dir)
    if result.error is not None:
        raise MigrationError(result.error)


@app.command()
def info(ctx: typer.Context, config_file: ConfigFile = None, json_output: Json = False) -> None:
    """Show the current version and every migration file's state."""
    with _reported(json_output):
        config = _config(ctx, config_file)
        with _initialized(config) as store:
            current = store.current_version()
            migrations = files.all_migrations(config.migrations_dir)
            recorded = store.infos_for([migration.version for migration in migrations])
        infos = [recorded.get(m.version) or VersionInfo.pending(m) for m in migrations]
        if json_output:
            print_json({"currentVersion": current, "migrations": [i.as_json() for i in infos]})
            return
        typer.echo(f"Current migration version: {current}")
        if not infos:
            typer.echo("No migrations files found")
            return
        print_table(["Version", "Name", "State", "Previous Version", "Started On", "Completed On",
                     "Error Reason"],
                    [[i.version, i.name, i.state, i.previous, metadata.format_timestamp(i.started_on),
                      metadata.format_timestamp(i.completed_on), i.error_reason] for i in infos])


@app.command()
def validate(ctx: typer.Context, config_file: ConfigFile = None, json_output: Json = False) -> None:
    """Check that the applied migrations' files are unchanged (their checksums)."""
    with _reported(json_output):
        config = _config(ctx, config_file)
        with _initialized(config) as store:
            result = validate_chain(store, config.migrations_dir)
        if json_output:
            print_json(result.as_json())
        if result.error is not None:
            raise MigrationError(result.error)
        log.info("Successfully validated checksums for migrations that have already been applied")


@app.command("destroy-metadata")
def destroy_metadata(ctx: typer.Context, config_file: ConfigFile = None) -> None:
    """Drop the metadata table and stream and their topics (not reversible)."""
    with _reported(), Server(_config(ctx, config_file)) as server:
        destroy(server)
