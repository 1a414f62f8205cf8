"""A persistent query that fails: its errors as ksqlDB reports them, and when it runs again.

A query whose Spark query fails (or cannot start) is ERROR on its owner, with ksqlDB's
``QueryError`` for each failure (``{timestamp, errorMessage, type}``, the last
``ksql.query.error.max.queue.size`` of the last hour, in EXPLAIN and SHOW QUERIES EXTENDED's
``queryErrors``), and starts again after a backoff: ``ksql.query.retry.backoff.initial.ms``
after its first failure, twice as long after each next one, at most
``ksql.query.retry.backoff.max.ms`` (ksqlDB's defaults: 15 s and 900 s). A query that completes
a micro-batch after it started again is healthy: its next failure waits the initial backoff.

Each error's type is ksqlDB's (:mod:`metastore.runtime.error_types`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from metastore.core.exceptions import PropertyValueError
from metastore.runtime.error_types import ErrorClassifier

INITIAL_BACKOFF = "ksql.query.retry.backoff.initial.ms"
MAX_BACKOFF = "ksql.query.retry.backoff.max.ms"
ERRORS_KEPT = "ksql.query.error.max.queue.size"
PROPERTIES = (INITIAL_BACKOFF, MAX_BACKOFF, ERRORS_KEPT)
ERRORS_FOR_MS = 3_600_000
"""How long an error is reported (ksqlDB's time-bounded queue: an hour)."""



class RetrySettingError(PropertyValueError):
    """A query retry property with a value it cannot take."""

    code = "bad_query_retry_setting"


@dataclass(frozen=True)
class RetrySettings:
    initial_ms: int = 15_000
    max_ms: int = 900_000
    errors_kept: int = 10

    @classmethod
    def of(cls, properties: Mapping[str, str]) -> RetrySettings:
        """The settings ``properties`` name (ksqlDB's names); the others' defaults."""
        default = cls()
        settings = cls(_positive(properties, INITIAL_BACKOFF, default.initial_ms),
                       _positive(properties, MAX_BACKOFF, default.max_ms),
                       _positive(properties, ERRORS_KEPT, default.errors_kept))
        if settings.max_ms < settings.initial_ms:
            raise RetrySettingError(MAX_BACKOFF, f"{settings.max_ms} is less than "
                                                 f"{INITIAL_BACKOFF} ({settings.initial_ms})")
        return settings

    def wait_seconds(self, failures: int) -> float:
        """The wait before the next start after ``failures`` failures in a row (1 or more)."""
        doublings = min(max(failures - 1, 0), 40)
        return float(min(self.initial_ms * (1 << doublings), self.max_ms)) / 1000


@dataclass
class QueryHealth:
    """One query's failures on this node: how many in a row, and its recent errors."""

    settings: RetrySettings
    classifier: ErrorClassifier = field(default_factory=ErrorClassifier)
    source_topics: frozenset[str] = frozenset()
    failures: int = 0
    retry_at: float | None = None
    """When it may start again (``time.monotonic()``); None: now."""
    errors: list[dict[str, Any]] = field(default_factory=list)

    def failed(self, message: str, detail: str = "", user: bool = False) -> float:
        """Record a failure with Spark's ``message`` (one line), typed by its whole text
        ``detail`` (the message when none), or USER when the node's own error says so
        (``user``); the seconds until it starts again."""
        self.failures += 1
        now_ms = int(time.time() * 1000)
        self.errors = [e for e in self.errors if now_ms - e["timestamp"] < ERRORS_FOR_MS]
        self.errors.append({"timestamp": now_ms, "errorMessage": message,
                            "type": self.classifier.classify(detail or message,
                                                             self.source_topics, user)})
        del self.errors[:-self.settings.errors_kept]
        wait = self.settings.wait_seconds(self.failures)
        self.retry_at = time.monotonic() + wait
        return wait

    def may_start(self) -> bool:
        """Whether its backoff is over."""
        return self.retry_at is None or time.monotonic() >= self.retry_at

    def started(self) -> None:
        """It runs: no backoff pending."""
        self.retry_at = None

    def reset(self) -> None:
        """PAUSEd: a RESUME starts it as new, its next failure waiting the initial backoff."""
        self.failures = 0
        self.retry_at = None

    def ran(self) -> None:
        """It completed a micro-batch since it started: its next failure starts over."""
        self.failures = 0

    def reported_errors(self) -> list[dict[str, Any]]:
        """Its errors of the last hour, oldest first."""
        now_ms = int(time.time() * 1000)
        return [dict(e) for e in self.errors if now_ms - e["timestamp"] < ERRORS_FOR_MS]


def _positive(properties: Mapping[str, str], name: str, default: int) -> int:
    value = properties.get(name)
    if value is None:
        return default
    try:
        number = int(str(value).strip())
    except ValueError:
        raise RetrySettingError(name, f"not a whole number: {value!r}") from None
    if number <= 0:
        raise RetrySettingError(name, f"must be positive, not {number}")
    return number


__all__ = ["PROPERTIES", "QueryHealth", "RetrySettingError", "RetrySettings"]
