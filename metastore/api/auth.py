"""Optional HTTP basic authentication: the credentials file, and the limit on failed logins.

The file holds one ``user:password`` per line. Only the line terminator is removed: everything
after the first ``:`` is the password, spaces included. Lines that are blank or start with ``#``
(after leading spaces) are skipped; a user name may not be empty or have surrounding spaces.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from pathlib import Path


class BasicAuth:
    def __init__(self, credentials: dict[str, str]) -> None:
        self._credentials = credentials

    @staticmethod
    def from_file(path: Path) -> BasicAuth:
        text = path.read_bytes().decode("utf-8-sig")
        credentials: dict[str, str] = {}
        for number, raw in enumerate(text.split("\n"), start=1):
            line = raw.removesuffix("\r")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            user, sep, password = line.partition(":")
            if not sep or not user:
                raise ValueError(f"{path}:{number}: expected 'user:password'")
            if user != user.strip():
                raise ValueError(f"{path}:{number}: the user name {user!r} has surrounding spaces")
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


class _Client:
    __slots__ = ("failures", "locked_until")

    def __init__(self) -> None:
        self.failures: deque[float] = deque()
        self.locked_until = 0.0


class LoginThrottle:
    """Locks out a client address after too many failed logins within a window.

    After ``max_failures`` failures within ``window`` seconds, the address is refused for
    ``lockout`` seconds, whatever it sends. A successful login does not clear earlier failures,
    so a client that knows one password cannot use it to keep guessing another. At most
    ``max_clients`` addresses are remembered, the least recently seen forgotten first, and each
    keeps at most ``max_failures`` timestamps: memory is bounded whatever clients send.
    """

    def __init__(self, max_failures: int = 10, window: float = 60.0, lockout: float = 60.0,
                 max_clients: int = 10_000, clock: Callable[[], float] = time.monotonic) -> None:
        self._max_failures = max_failures
        self._window = window
        self._lockout = lockout
        self._max_clients = max_clients
        self._clock = clock
        self._clients: OrderedDict[str, _Client] = OrderedDict()
        self._lock = threading.Lock()

    def retry_after(self, address: str) -> float:
        """Seconds ``address`` is still locked out for; 0 when it may try."""
        with self._lock:
            client = self._clients.get(address)
            if client is None:
                return 0.0
            return max(client.locked_until - self._clock(), 0.0)

    def failed(self, address: str) -> None:
        """Count a failed login from ``address``; lock it out when that is one too many."""
        now = self._clock()
        with self._lock:
            client = self._touch(address)
            client.failures.append(now)
            while client.failures and client.failures[0] <= now - self._window:
                client.failures.popleft()
            if len(client.failures) >= self._max_failures:
                client.failures.clear()
                client.locked_until = now + self._lockout

    def tracked(self) -> int:
        """Addresses currently remembered."""
        with self._lock:
            return len(self._clients)

    def _touch(self, address: str) -> _Client:
        client = self._clients.pop(address, None) or _Client()
        self._clients[address] = client
        while len(self._clients) > self._max_clients:
            self._clients.popitem(last=False)
        return client


__all__ = ["BasicAuth", "LoginThrottle"]
