"""The lines entered in the shell, across sessions, as ksqlDB's CLI keeps them: read from
``~/.metastore_history`` (``METASTORE_HISTORY_FILE`` names another file) at the start, written
back at the end, listed by HISTORY, searched with Ctrl-R and the arrow keys (readline, imported
only once a shell starts)."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

HISTORY_FILE_ENV = "METASTORE_HISTORY_FILE"
MAX_LINES = 1000
"""The newest lines kept in the file."""


def history_file() -> Path:
    named = os.environ.get(HISTORY_FILE_ENV)
    return Path(named) if named else Path.home() / ".metastore_history"


class History:
    def __init__(self, path: Path) -> None:
        import readline

        self.path = path
        readline.set_history_length(MAX_LINES)
        with contextlib.suppress(OSError):
            readline.read_history_file(path)

    @staticmethod
    def add(line: str) -> None:
        """Keep a line entered (readline keeps those typed at a terminal itself)."""
        import readline

        if line.strip() and not (sys.stdin.isatty() and sys.stdout.isatty()):
            readline.add_history(line)

    @staticmethod
    def entries() -> list[str]:
        import readline

        count = readline.get_current_history_length()
        return [readline.get_history_item(index) or "" for index in range(1, count + 1)]

    def save(self) -> None:
        import readline

        with contextlib.suppress(OSError):
            readline.write_history_file(self.path)
