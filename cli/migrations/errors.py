"""The migrations tool's one error type, and the exit codes scripts can trust."""

from __future__ import annotations

FAILED = 1
"""A migration, a validation or a statement failed, or the metadata is not as expected."""
USAGE = 2
"""The command was used wrongly (options, arguments, the properties file) or the server could
not be reached."""


class MigrationError(Exception):
    """Anything that stops a migrations command; ``exit_code`` is :data:`FAILED` or
    :data:`USAGE`."""

    def __init__(self, message: str, exit_code: int = FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


def usage_error(message: str) -> MigrationError:
    return MigrationError(message, USAGE)
