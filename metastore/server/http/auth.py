"""Optional HTTP basic authentication: the credentials file, and the limits on failed logins.

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

RESERVED_USERS = frozenset({"queries-file"})
"""Submitters the node writes as itself (:mod:`metastore.server.headless`), which no
authenticated user may claim in the command log."""


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
            if user in RESERVED_USERS:
                raise ValueError(f"{path}:{number}: the user name {user!r} is reserved: the "
                                 "command log records headless mode's writes under it")
            credentials[user] = password
        if not credentials:
            raise ValueError(f"{path}: no credentials")
        return BasicAuth(credentials)

    def user_for(self, header: str | None) -> str | None:
        """The authenticated user for an Authorization header, or None."""
        claimed = claimed_credentials(header)
        if claimed is None:
            return None
        user, password = claimed
        expected = self._credentials.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            return None
        return user


def claimed_credentials(header: str | None) -> tuple[str, str] | None:
    """The user and password a basic Authorization header claims (not checked), or None."""
    if not header or not header.lower().startswith("basic "):
        return None
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, _, password = decoded.partition(":")
    return user, password


def claimed_user(header: str | None) -> str | None:
    """The user a basic Authorization header names (not checked), or None."""
    claimed = claimed_credentials(header)
    return claimed[0] if claimed is not None else None


class _Failures:
    __slots__ = ("failures", "locked_until", "users")

    def __init__(self) -> None:
        self.failures: deque[float] = deque()
        self.locked_until = 0.0
        self.users: OrderedDict[str, float] = OrderedDict()
        """For an address: the users that failed from it, with when they last did."""


class LoginThrottle:
    """Locks out a user after too many failed logins, and an address only when many users fail
    from it, as a login service does: ten wrong passwords for one user from a proxy or a NAT
    lock that user out, not everyone behind it.

    After ``max_failures`` failures for one user within ``window`` seconds, that user is refused
    for ``lockout`` seconds, whatever password comes. After ``max_users_per_address`` distinct
    users failed from one address within the window (password spraying), the address is refused
    as long. A successful login does not clear earlier failures, so a client that knows one
    password cannot use it to keep guessing another. At most ``max_clients`` users and as many
    addresses are remembered, the least recently seen forgotten first, and each keeps at most
    ``max_failures`` timestamps and ``max_users_per_address`` users: memory is bounded whatever
    clients send.
    """

    def __init__(self, max_failures: int = 10, window: float = 60.0, lockout: float = 60.0,
                 max_clients: int = 10_000, max_users_per_address: int = 20,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._max_failures = max_failures
        self._window = window
        self._lockout = lockout
        self._max_clients = max_clients
        self._max_users = max_users_per_address
        self._clock = clock
        self._users: OrderedDict[str, _Failures] = OrderedDict()
        self._addresses: OrderedDict[str, _Failures] = OrderedDict()
        self._lock = threading.Lock()

    def retry_after(self, user: str | None, address: str) -> float:
        """Seconds a login of ``user`` from ``address`` is still refused for; 0 when it may
        try."""
        now = self._clock()
        with self._lock:
            found = [self._users.get(user) if user is not None else None,
                     self._addresses.get(address)]
            return max([f.locked_until - now for f in found if f is not None] + [0.0])

    def failed(self, user: str | None, address: str) -> None:
        """Count a failed login of ``user`` (None: no user could be read) from ``address``."""
        now = self._clock()
        with self._lock:
            if user is not None:
                self._count(_touch(self._users, user, self._max_clients), now)
            spraying = _touch(self._addresses, address, self._max_clients)
            spraying.users.pop(user or "", None)
            spraying.users[user or ""] = now
            while spraying.users and (len(spraying.users) > self._max_users or next(
                    iter(spraying.users.values())) <= now - self._window):
                spraying.users.popitem(last=False)
            if len(spraying.users) >= self._max_users:
                spraying.users.clear()
                spraying.locked_until = now + self._lockout

    def _count(self, failures: _Failures, now: float) -> None:
        failures.failures.append(now)
        while failures.failures and failures.failures[0] <= now - self._window:
            failures.failures.popleft()
        if len(failures.failures) >= self._max_failures:
            failures.failures.clear()
            failures.locked_until = now + self._lockout

    def tracked(self) -> int:
        """Users and addresses currently remembered."""
        with self._lock:
            return len(self._users) + len(self._addresses)


def _touch(remembered: OrderedDict[str, _Failures], name: str, bound: int) -> _Failures:
    found = remembered.pop(name, None) or _Failures()
    remembered[name] = found
    while len(remembered) > bound:
        remembered.popitem(last=False)
    return found


__all__ = ["BasicAuth", "LoginThrottle", "claimed_credentials", "claimed_user"]
