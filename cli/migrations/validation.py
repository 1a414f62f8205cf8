"""``validate``, which ``apply`` also runs first: the applied versions, followed from the last one
migrated back through each one's ``previous``, are all MIGRATED and each still has its file, with
the checksum recorded when it was applied."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cli.migrations.errors import FAILED, MigrationError
from cli.migrations.files import checksum, migration_for_version
from cli.migrations.metadata import NONE_VERSION, MetadataStore, require_migrated


@dataclass(frozen=True)
class CheckedVersion:
    version: str
    file: str
    expected_checksum: str
    actual_checksum: str

    def as_json(self) -> dict[str, Any]:
        return {"version": self.version, "file": self.file,
                "expectedChecksum": self.expected_checksum,
                "actualChecksum": self.actual_checksum,
                "matches": self.expected_checksum == self.actual_checksum}


@dataclass
class ValidationResult:
    latest_migrated_version: str = NONE_VERSION
    checked: list[CheckedVersion] = field(default_factory=list)
    error: str | None = None

    @property
    def valid(self) -> bool:
        return self.error is None

    def as_json(self) -> dict[str, Any]:
        return {"valid": self.valid, "latestMigratedVersion": self.latest_migrated_version,
                "checked": [version.as_json() for version in self.checked],
                "error": self.error}


def validate(store: MetadataStore, directory: Path) -> ValidationResult:
    """The result; a failed check is its ``error`` (an unreachable server still raises)."""
    result = ValidationResult()
    try:
        _follow_chain(store, directory, result)
    except MigrationError as error:
        if error.exit_code != FAILED:
            raise
        result.error = error.message
    return result


def _follow_chain(store: MetadataStore, directory: Path, result: ValidationResult) -> None:
    version = result.latest_migrated_version = store.latest_migrated_version()
    next_version: str | None = None
    while version != NONE_VERSION:
        info = store.require_info(version)
        if next_version is not None:
            require_migrated(version, info, next_version)
        migration = migration_for_version(int(version), directory) if version.isdigit() else None
        if migration is None:
            raise MigrationError("No migrations file found for version with status MIGRATED. "
                                 f"Version: {version}")
        actual = checksum(migration.path)
        result.checked.append(CheckedVersion(version, str(migration.path), info.checksum, actual))
        if info.checksum != actual:
            raise MigrationError(
                f"Migrations file found for version {version} does not match the checksum saved "
                f"for this version. Expected checksum: {info.checksum}. Actual checksum: "
                f"{actual}. File name: {migration.path}")
        next_version, version = version, info.previous
