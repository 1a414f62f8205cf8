"""Migration files: ``V<six digits>__<name>.sql`` in the project's migrations directory, their
versions and order, their checksums, the project layout ``new-project`` makes and the empty file
``create`` adds.

As ksqlDB's ``MigrationsDirectoryUtil``: a file is a migration when its name *contains*
``V<6 digits>__<name>.sql`` (other files are skipped with a warning); files are taken in the
order of their names; two files of one version are an error; a migration's name is the part
after ``__`` with underscores as spaces; its checksum is the MD5 of the file's bytes, in
lower-case hex.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from cli.migrations.config import CONFIG_FILE_NAME, MIGRATIONS_DIR, initial_properties
from cli.migrations.errors import MigrationError, usage_error

MAX_VERSION = 999_999
FILE_PATTERN = re.compile(r"V([0-9]{6})__(.+)\.sql")
_INVALID_NAME_CHARACTERS = re.compile(r'[ \t\n\x0b\f\r/\\:*?"<>|]')
"""What ``create`` replaces with ``_`` in a description (Java's ``\\s`` and the characters some
file systems refuse)."""

log = logging.getLogger("cli.migrations")


@dataclass(frozen=True)
class MigrationFile:
    version: int
    name: str
    path: Path


def file_prefix(version: int) -> str:
    return f"V{version:06d}"


def file_name(version: int, description: str) -> str:
    """``V000002__Add_users.sql`` for version 2 and ``Add users``."""
    return f"{file_prefix(version)}__{_INVALID_NAME_CHARACTERS.sub('_', description)}.sql"


def parse_file_name(directory: Path, name: str) -> MigrationFile | None:
    """The migration a file name stands for, or None (with a warning) when it is none."""
    match = FILE_PATTERN.search(name)
    if match is None:
        log.warning("Skipping file does not match expected migration file pattern "
                    "'V<six digit number>__<name>.sql': %s", name)
        return None
    version = int(match.group(1))
    if version <= 0:
        raise MigrationError(f"MigrationFile file versions must be positive. Found: {name}")
    return MigrationFile(version, match.group(2).replace("_", " "), directory / name)


def all_migrations(directory: Path) -> list[MigrationFile]:
    """Every migration of ``directory`` in the order of their file names."""
    names = sorted(entry.name for entry in _entries(directory) if not entry.is_dir())
    return _unique([m for m in (parse_file_name(directory, n) for n in names) if m is not None])


def migration_for_version(version: int, directory: Path) -> MigrationFile | None:
    prefix = file_prefix(version)
    found = [parse_file_name(directory, entry.name) for entry in _entries(directory)
             if entry.name.startswith(prefix)]
    matches = _unique(sorted((m for m in found if m is not None), key=lambda m: m.path.name))
    return matches[0] if matches else None


def _entries(directory: Path) -> list[Path]:
    if not directory.is_dir():
        raise MigrationError(f"{directory} is not a directory.")
    try:
        return list(directory.iterdir())
    except OSError as error:
        raise MigrationError(f"Failed to retrieve files from {directory}: {error}") from error


def _unique(migrations: list[MigrationFile]) -> list[MigrationFile]:
    for previous, current in itertools.pairwise(migrations):
        if previous.version == current.version:
            raise MigrationError(
                "Found multiple migration files with the same version. Version: "
                f"{current.version}. Files: '{current.path}', '{previous.path}'")
    return migrations


def checksum(path: Path) -> str:
    try:
        return hashlib.md5(path.read_bytes()).hexdigest()
    except OSError as error:
        raise MigrationError(f"Could not compute hash for file '{path}': {error}") from error


def read_contents(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError as error:
        raise MigrationError(f"Failed to read {path}: {error}") from error


def create_migration(directory: Path, description: str, version: int | None) -> MigrationFile:
    """An empty migration file: version ``version``, or the latest version's next."""
    if version is not None:
        _check_version_option(version)
        existing = migration_for_version(version, directory)
        if existing is not None:
            raise MigrationError(
                f"Found existing migrations file for version {version}: {existing.path}")
    if not description:
        raise usage_error("Description cannot be empty.")
    migrations = all_migrations(directory)
    new_version = version or (migrations[-1].version + 1 if migrations else 1)
    if new_version > MAX_VERSION:
        raise MigrationError(f"Invalid version file version: {new_version}. Version must fit "
                             "into a six-digit integer.")
    path = directory / file_name(new_version, description)
    log.info("Creating migration file: %s", path)
    try:
        path.touch(exist_ok=False)
    except OSError as error:
        raise MigrationError(f"Failed to create file {path}: {error}") from error
    log.info("Migration file successfully created")
    return MigrationFile(new_version, description.replace("_", " "), path)


def _check_version_option(version: int) -> None:
    if not 1 <= version <= MAX_VERSION:
        raise usage_error(f"Version {version} is out of range: a version is between 1 and "
                          f"{MAX_VERSION}.")


def new_project(root: Path, server_url: str) -> Path:
    """The project's directory, its ``migrations/`` and its properties file; the properties
    file's path. Existing directories are kept; an existing properties file is an error."""
    log.info("Creating new migrations project at %s", root)
    for directory in (root, root / MIGRATIONS_DIR):
        _create_directory(directory)
    config_file = root / CONFIG_FILE_NAME
    log.info("Creating file: %s", config_file)
    try:
        with config_file.open("x", encoding="utf-8") as out:
            out.write(initial_properties(server_url))
    except FileExistsError:
        raise MigrationError(f"Failed to create file. File already exists: {config_file}") from None
    except OSError as error:
        raise MigrationError(f"Failed to create file {config_file}: {error}") from error
    log.info("Migrations project directory created successfully")
    return config_file


def _create_directory(directory: Path) -> None:
    if directory.is_dir():
        log.warning("%s already exists. Skipping directory creation.", directory)
        return
    if directory.exists():
        raise MigrationError(f"{directory} already exists as a file. Cannot create directory.")
    log.info("Creating directory: %s", directory)
    try:
        directory.mkdir(parents=True)
    except OSError as error:
        raise MigrationError(f"Failed to create directory {directory}: {error}") from error
