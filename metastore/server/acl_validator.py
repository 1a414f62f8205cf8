"""ksqlDB's topic access validator on the broker's own ACLs: each statement's needs
(:mod:`metastore.engine.access`) checked for the Kafka principal of the user who sent it,
``User:<name>``, against the ACLs the node reads with DescribeAcls (:mod:`metastore.kafka.acls`
decides as the broker's StandardAuthorizer would).

Settings (``--ksql-property``, ksqlDB's names):
- ``ksql.access.validator.enable``: ``auto`` (the default) checks when the node authenticates
  its users (``--auth-file``, or client certificates) and its Kafka runs an authorizer; ``on``
  refuses to start unless both hold; ``off`` never checks.
- ``ksql.authorization.cache.expiry.time.secs`` (default 30): how long the node keeps the ACLs
  it read, so a grant or a revocation is seen within that time; 0 reads them for every request.

The node's own principal needs DESCRIBE on the cluster to read the ACLs; without it, a node that
would check does not start. A read that fails later keeps the ACLs read last (and is tried again
after the expiry); an ``on`` node whose Kafka no longer shows an authorizer refuses everything
until it does again. ``auto`` decides once, at start. The role file (:mod:`metastore.server.
roles`) may be used as well: a request then needs both to allow it.

A connector reads and writes Kafka as the Connect worker's principal, whatever its creator may
touch, so CREATE and DROP CONNECTOR need what lets a principal manage the cluster: ALTER on the
cluster (or ALL).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from metastore.core.exceptions import MetastoreError, PropertyValueError
from metastore.engine.access import CONNECT, Need, refuse
from metastore.kafka.acls import AclImage

log = logging.getLogger(__name__)

ENABLE = "ksql.access.validator.enable"
CACHE_EXPIRY = "ksql.authorization.cache.expiry.time.secs"
PROPERTIES = frozenset({ENABLE, CACHE_EXPIRY})
ON, OFF, AUTO = "on", "off", "auto"


class AccessValidatorError(MetastoreError):
    """The validator was asked for and cannot run: no authorizer, or no right to read ACLs."""


@dataclass(frozen=True)
class AccessValidatorSettings:
    mode: str = AUTO
    cache_expiry: float = 30.0
    """Seconds the ACLs read are kept."""

    @staticmethod
    def of(properties: Mapping[str, str], users_authenticated: bool) -> AccessValidatorSettings:
        """The settings of ``properties``; ``users_authenticated``: whether the node knows
        its users (an ``auto`` node without them does not check)."""
        mode = properties.get(ENABLE, AUTO).strip().lower()
        if mode not in (ON, OFF, AUTO):
            raise PropertyValueError(ENABLE, "expected on, off or auto")
        if mode == ON and not users_authenticated:
            raise PropertyValueError(ENABLE, "on checks each user's ACLs, so it needs "
                                             "--auth-file or client certificates (the users "
                                             "requests come from)")
        try:
            expiry = float(properties.get(CACHE_EXPIRY, "30"))
        except ValueError:
            expiry = -1.0
        if not 0 <= expiry <= 86_400:
            raise PropertyValueError(CACHE_EXPIRY, "expected seconds from 0 to 86400")
        return AccessValidatorSettings(mode if users_authenticated else OFF, expiry)


class KafkaAclValidator:
    """The cluster's ACLs, read again once older than ``expiry`` seconds, checked for a user's
    principal (an :class:`~metastore.engine.access.AccessCheck`)."""

    def __init__(self, read: Callable[[], AclImage | None], expiry: float,
                 first: AclImage | None = None, mode: str = AUTO,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._read = read
        self._expiry = expiry
        self._mode = mode
        self._clock = clock
        self._lock = threading.Lock()
        self._image = first
        self._read_at = clock() if first is not None else None

    def check(self, user: str, needs: Iterable[Need]) -> None:
        """Refuse the needs the ACLs do not give ``User:<user>``."""
        image = self._current()
        if image is None and self._mode != ON:
            return  # the brokers stopped authorizing: Kafka lets everyone do everything
        principal = f"User:{user}"
        refuse([need for need in needs if image is None or not _allows(image, principal, need)])

    def _current(self) -> AclImage | None:
        with self._lock:
            now = self._clock()
            if self._read_at is not None and now - self._read_at < self._expiry:
                return self._image
            try:
                image = self._read()
            except MetastoreError:
                if self._image is None:
                    raise
                log.warning("reading the cluster's ACLs failed; checking with those read "
                            "%.0f s ago", now - (self._read_at or now), exc_info=True)
                self._read_at = now
                return self._image
            if image is None and self._mode == ON:
                log.warning("%s=on, and the Kafka cluster shows no authorizer: every "
                            "statement that needs a topic is refused", ENABLE)
            self._image, self._read_at = image, now
            return image


def _allows(image: AclImage, principal: str, need: Need) -> bool:
    if need.operation == CONNECT:
        return image.allows_on_cluster(principal, "ALTER")
    return image.allows(principal, need.operation.upper(), need.topic)


def start_validator(settings: AccessValidatorSettings,
                    read: Callable[[], AclImage | None]) -> KafkaAclValidator | None:
    """The validator ``settings`` ask for, having read the ACLs once (so a node that may not
    read them, or an ``on`` node whose Kafka runs no authorizer, fails to start); None when
    nothing is to be checked."""
    if settings.mode == OFF:
        return None
    try:
        image = read()
    except MetastoreError as error:
        raise AccessValidatorError(
            f"{ENABLE}={settings.mode}: the node cannot read the cluster's ACLs ({error}); grant "
            "its principal DESCRIBE on the cluster, or set it to off") from error
    if image is None:
        if settings.mode == ON:
            raise AccessValidatorError(f"{ENABLE}=on, but the Kafka cluster runs no authorizer")
        return None
    return KafkaAclValidator(read, settings.cache_expiry, first=image, mode=settings.mode)


__all__ = ["AUTO", "CACHE_EXPIRY", "ENABLE", "OFF", "ON", "PROPERTIES", "AccessValidatorError",
           "AccessValidatorSettings", "KafkaAclValidator", "start_validator"]
