"""Optional HTTP basic authentication from a file of ``user:password`` lines."""

from __future__ import annotations

import base64
import binascii
import hmac
from pathlib import Path


class BasicAuth:
    def __init__(self, credentials: dict[str, str]) -> None:
        self._credentials = credentials

    @staticmethod
    def from_file(path: Path) -> BasicAuth:
        credentials: dict[str, str] = {}
        for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            user, sep, password = line.partition(":")
            if not sep or not user:
                raise ValueError(f"{path}:{number}: expected 'user:password'")
            credentials[user] = password
        if not credentials:
            raise ValueError(f"{path}: no credentials")
        return BasicAuth(credentials)

    def user_for(self, header: str | None) -> str | None:
        """The authenticated user for an Authorization header, or None."""
        if not header or not header.lower().startswith("basic "):
            return None
        try:
            decoded = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        user, _, password = decoded.partition(":")
        expected = self._credentials.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            return None
        return user
