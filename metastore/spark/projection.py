"""Keep a node's Spark catalog equal to its image, by reconciling, never by replaying.

``reconcile(image)`` compares the objects the image wants with what Spark holds in the service's
database, and applies only the net difference: drops, then creates, then one read back of what
changed. What Spark holds is read once (one ``SHOW TABLE EXTENDED`` call), then known from the
read backs; with a persistent catalog it is remembered across restarts
(:mod:`metastore.spark.catalog_state`), so a restarted node whose catalog already matches makes
no Spark call. The image last reconciled costs nothing at all (images are immutable, so
"unchanged" is "the same object": no O(catalog) fingerprint is computed per command). The Spark
catalog fingerprint is computed from what Spark reports
(names, kinds, schemas and spec properties), canonically, so it does not depend on creation order.

:class:`ProjectionRunner` drives it from the replica: it reconciles the newest image in a thread of
its own, so Spark never blocks the log, and retries after a failure. It also owns the session's
life: when Spark is lost (:mod:`metastore.spark.liveness`) the runner forgets the session, so
nothing is handed a dead one, starts a new one (at once, unless the lost one had run for less
than five minutes: then after a backoff doubling up to a minute, as it does while starting
fails) and makes its catalog equal to the newest image again.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from metastore.catalog.image import Image
from metastore.catalog.image_worker import ImageChange
from metastore.spark.catalog_clones import CatalogClones
from metastore.spark.catalog_state import CatalogStateFile, SparkObject
from metastore.spark.session import SparkApplication
from metastore.spark.views import SPEC_PROPERTY, CatalogObject, objects_for

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

RESTART_BACKOFF_SECONDS = (1.0, 60.0)
"""The wait before a lost Spark's next start attempt, doubled up to the second value."""
HEALTHY_SECONDS = 300.0
"""How long a session must have run for its loss to be restarted at once (the backoff is then
forgotten)."""

PARTIAL_READ_BACK = 64
"""Read back only the changed objects when there are at most this many: a pattern of many names
is slower than reading everything (the Hive catalog matches it name by name)."""


@dataclass
class ReconcileResult:
    created: int = 0
    dropped: int = 0
    catalog_calls: int = 0
    seconds: float = 0.0


@dataclass
class ProjectionStatus:
    in_sync: bool = False
    reason: str | None = "Spark is starting"
    fingerprint: str | None = None
    image: Image | None = None
    """The image the Spark catalog was last made equal to."""
    last: ReconcileResult = field(default_factory=ReconcileResult)
    total_catalog_calls: int = 0
    passes: int = 0
    """Reconciliations that changed or read the Spark catalog."""
    application: SparkApplication | None = None
    """Where the node's Spark runs, once it started."""


_TABLE = re.compile(r"^Table: (.*)$", re.M)
_TYPE = re.compile(r"^Type: (.*)$", re.M)
_PROPS = re.compile(r"^Table Properties: \[(.*)\]$", re.M)
_SCHEMA = re.compile(r"^Schema: root\n(.*)", re.S)


class SparkProjection:
    def __init__(self, spark: SparkSession, database: str, kafka_options: Mapping[str, str],
                 state_file: CatalogStateFile | None = None) -> None:
        self.spark = spark
        self.database = database
        self.kafka_options = dict(kafka_options)
        self.catalog_calls = 0
        self._reconciled_image: Image | None = None
        self._fingerprint: str | None = None
        self._database_ready = False
        self._state_file = state_file
        self._known: dict[str, SparkObject] | None = None
        """What Spark holds, as last read back (or remembered by the state file)."""
        self._clones = CatalogClones(spark, database, self.kafka_options, self._count_call)

    def _count_call(self) -> None:
        self.catalog_calls += 1

    def _sql(self, statement: str) -> DataFrame:
        self.catalog_calls += 1
        return self.spark.sql(statement)

    def desired(self, image: Image) -> dict[str, CatalogObject]:
        wanted: dict[str, CatalogObject] = {}
        for source in image.sources.values():
            for obj in objects_for(source, self.database, self.kafka_options):
                wanted[obj.name] = obj
        return wanted

    def _ensure_database(self) -> None:
        if not self._database_ready:
            self._sql(f"CREATE DATABASE IF NOT EXISTS `{self.database}`")
            self._database_ready = True

    def actual(self, names: Collection[str] | None = None) -> dict[str, SparkObject]:
        """What Spark holds in the database (of ``names`` only, when given), in one call."""
        self._ensure_database()
        pattern = "*" if names is None else "|".join(sorted(names))
        rows = self._sql(f"SHOW TABLE EXTENDED IN `{self.database}` LIKE '{pattern}'").collect()
        found: dict[str, SparkObject] = {}
        for row in rows:
            if row["isTemporary"]:
                continue
            info = row["information"]
            properties = _properties(info)
            schema_match = _SCHEMA.search(info)
            type_match = _TYPE.search(info)
            found[row["tableName"]] = SparkObject(
                name=row["tableName"], is_view=bool(type_match and type_match.group(1) == "VIEW"),
                spec=properties.get(SPEC_PROPERTY),
                schema=schema_match.group(1).strip() if schema_match else "")
        return found

    def reconcile(self, image: Image) -> ReconcileResult:
        started = time.perf_counter()
        calls_before = self.catalog_calls
        result = ReconcileResult()
        if self._reconciled_image is image:
            return result
        wanted = self.desired(image)
        if self._known is None and self._state_file is not None:
            self._known = self._state_file.load()
            self._database_ready = self._known is not None
        read_back = self._known is None
        present = dict(self._known) if self._known is not None else self.actual()
        stale = [obj for name, obj in present.items()
                 if name not in wanted or wanted[name].spec != obj.spec]
        stale_names = {obj.name for obj in stale}
        missing = [wanted_obj for name, wanted_obj in wanted.items()
                   if name not in present or name in stale_names]
        if stale or missing:
            self._known = None
            if self._state_file is not None:
                self._state_file.forget()
        for obj in sorted(stale, key=lambda o: not o.is_view):  # views before their tables
            kind = "VIEW" if obj.is_view else "TABLE"
            self._sql(f"DROP {kind} IF EXISTS `{self.database}`.`{obj.name}`")
            present.pop(obj.name)
            result.dropped += 1
        if missing:
            self._ensure_database()
            self._clones.create(missing)  # tables, then their views
            result.created += len(missing)
        if result.created or result.dropped:
            changed = {obj.name for obj in stale} | {obj.name for obj in missing}
            if len(changed) <= PARTIAL_READ_BACK and all(_plain(name) for name in changed):
                present.update(self.actual(changed))
            else:
                present = self.actual()
            read_back = True
        if read_back and self._state_file is not None:
            self._state_file.save(present)
        self._known = present
        self._fingerprint = fingerprint(present.values())
        self._reconciled_image = image
        result.catalog_calls = self.catalog_calls - calls_before
        result.seconds = time.perf_counter() - started
        return result

    @property
    def fingerprint(self) -> str | None:
        return self._fingerprint


def _plain(name: str) -> bool:
    """Whether ``name`` can stand in a SHOW TABLES pattern as itself."""
    return re.fullmatch(r"[0-9a-z_]+", name) is not None


def _properties(info: str) -> dict[str, str]:
    match = _PROPS.search(info)
    if not match:
        return {}
    out = {}
    for part in match.group(1).split(", "):
        key, _, value = part.partition("=")
        out[key] = value
    return out


def fingerprint(objects: Iterable[SparkObject]) -> str:
    """SHA-256 over what Spark reports, sorted by name."""
    digest = hashlib.sha256()
    for obj in sorted(objects, key=lambda o: o.name):
        digest.update(f"{obj.name}\0{obj.is_view}\0{obj.spec}\0{obj.schema}\n".encode())
    return digest.hexdigest()


class ProjectionRunner:
    """Keeps the Spark catalog equal to the newest image, as an image consumer of the node's
    :class:`~metastore.catalog.image_worker.ImageWorker`: a Spark failure is reported and retried, and
    never blocks the log."""

    name = "the Spark catalog projection"

    def __init__(self, start_projection: Callable[[], SparkProjection],
                 before_projection: Callable[[], None] | None = None,
                 discard: Callable[[], None] = lambda: None,
                 restart_backoff: tuple[float, float] = RESTART_BACKOFF_SECONDS) -> None:
        """``discard``: forget a lost session, so that ``start_projection`` starts a new one."""
        self._start_projection = start_projection
        self._before_projection = before_projection
        self._discard = discard
        self.projection: SparkProjection | None = None
        self.status = ProjectionStatus()
        self._projected = threading.Condition()
        self._failures = 0
        self._image: Image | None = None
        """The newest image taken: what a restarted session's catalog is made equal to."""
        self._backoff = restart_backoff
        self._delay = restart_backoff[0]
        self._restart_at = 0.0
        self.lost_reason: str | None = None
        """Why Spark was lost, while it is not running again."""
        self.restarts = 0
        self._start_failure: str | None = None
        self._started_at = -math.inf
        self._stale = False
        """Whether the catalog of a restarted session is not equal to the newest image yet."""

    def open(self) -> None:
        try:
            self.projection = self._start_projection()
        except Exception as error:  # Spark failing to start must not take the node down
            self.status.reason = self._start_failure = f"Spark did not start: {error}"
            raise
        self._start_failure = None
        self._started_at = time.monotonic()
        self.status.application = SparkApplication.of(self.projection.spark)
        self.status.reason = "waiting for the log"

    @property
    def spark(self) -> SparkSession | None:
        """The running session, None while Spark starts, failed to start, or was lost."""
        running = self.projection
        return running.spark if running is not None else None

    @property
    def down(self) -> str | None:
        """Why this node's Spark cannot serve (lost, or it did not start), or None."""
        if self.lost_reason is not None:
            return self.status.reason
        return self._start_failure

    def tick(self) -> None:
        """Restart a lost Spark when its time has come (the catalog changes only with the
        image)."""
        if self.lost_reason is not None:
            if time.monotonic() >= self._restart_at:
                self._restart()
        elif self._stale and self._image is not None:
            self._project(self._image)

    def lost(self, reason: str) -> None:
        """Spark is gone (called from the liveness thread): hand its session to nobody any
        more; it is restarted once :meth:`may_restart` says the loss was handled."""
        with self._projected:
            self.projection = None
            self.lost_reason = reason
            self._restart_at = math.inf
            self.status.in_sync = False
            self.status.reason = f"Spark was lost ({reason}); it is being restarted"
            self.status.application = None
            self._failures += 1
            self._projected.notify_all()  # pull queries waiting for it stop waiting

    def may_restart(self) -> None:
        """The loss was handled (the node left the query group...): restart Spark at the next
        tick, or after the backoff when the session lost had not been healthy for long (a
        session that dies soon after each start must not be restarted every second)."""
        with self._projected:
            healthy_for = time.monotonic() - self._started_at
            if healthy_for >= HEALTHY_SECONDS:
                self._delay = self._backoff[0]
                self._restart_at = time.monotonic()
            else:
                self._restart_at = time.monotonic() + self._delay
                self._delay = min(self._delay * 2, self._backoff[1])

    def _restart(self) -> None:
        self._discard()
        try:
            self.open()
        except Exception as error:  # tried again after the backoff
            self._restart_at = time.monotonic() + self._delay
            self.status.reason = (f"Spark was lost ({self.lost_reason}); restarting it failed "
                                  f"({str(error).strip()[:200]}); next attempt in "
                                  f"{self._delay:g} s")
            log.warning("%s", self.status.reason)
            self._delay = min(self._delay * 2, self._backoff[1])
            return
        log.info("Spark restarted after it was lost (%s)", self.lost_reason)
        self.lost_reason = None
        self.restarts += 1
        self._stale = True
        self.tick()

    def _took(self, image: Image) -> None:
        with self._projected:
            self.status.image = image
            self._projected.notify_all()

    def wait_for_sources(self, image: Image, names: Iterable[str], timeout: float) -> bool:
        """Wait, at most ``timeout`` seconds, until the Spark catalog holds each of ``names`` as
        ``image`` defines it (a statement just answered is projected a moment later); whether
        it does. Images share the objects they did not change, so the same object means the
        same definition; a catalog in sync with a newer image holds them too. A reconciliation
        that fails meanwhile ends the wait: the catalog will not hold them soon."""
        wanted = list(names)

        def projected() -> bool:
            seen = self.status.image
            if seen is None:
                return False
            if self.status.in_sync and seen.offset >= image.offset:
                return True
            return all(seen.sources.get(name) is image.sources.get(name) for name in wanted)

        with self._projected:
            failures = self._failures
            self._projected.wait_for(lambda: projected() or self._failures > failures, timeout)
            return projected()

    def consume(self, change: ImageChange) -> None:
        if self._before_projection is not None:
            self._before_projection()
        image = self._image = change.image
        if self.projection is None:
            return  # Spark was lost: its restart projects the newest image
        if self.status.in_sync and change.previous is not None and not (change.sources
                                                                        or change.types):
            self._took(image)  # only queries or request ids changed: nothing to project
            return
        self._project(image)

    def _project(self, image: Image) -> None:
        assert self.projection is not None, "open() first"
        try:
            result = self.projection.reconcile(image)
        except Exception as error:  # reported, retried; the log goes on
            self.status.in_sync = False
            self.status.reason = f"reconcile failed: {str(error).splitlines()[0][:300]}"
            with self._projected:
                self._failures += 1
                self._projected.notify_all()  # pull queries waiting for it stop waiting
            raise
        self.status.last = result
        if result.catalog_calls:
            self.status.passes += 1
        self.status.total_catalog_calls = self.projection.catalog_calls
        self.status.fingerprint = self.projection.fingerprint
        self.status.in_sync = True
        self.status.reason = None
        self._stale = False
        self._took(image)
        if result.created or result.dropped:
            log.info("Spark catalog reconciled: %d created, %d dropped, %d calls, %.2fs",
                     result.created, result.dropped, result.catalog_calls, result.seconds)
