"""Repair and restore the command log: back it up, leave out records that cannot be replayed,
and write the rest into a re-created topic at the offsets they had.

A record that a node cannot replay (undecodable, of a newer version, or one whose command makes
``apply`` raise) stops every node at its offset for good. :func:`repair` reads the whole committed
log, writes every record to a backup file, finds the records that fail to replay (replaying the
rest as a node would), and, when told to, fences the writer, deletes the topic, re-creates it with
the same shape and writes the kept records back. :func:`restore` writes a backup back the same way,
so a repair can be undone.

This module plans (:func:`plan_repair`) and carries out the two operations; the records and the
backup file are :mod:`metastore.log.backup`'s, writing them back at their offsets (and fencing
the writer first) is :mod:`metastore.log.rewrite`'s. The repaired log is checked to replay to
exactly the image the plan announced.
"""

from __future__ import annotations

import time
from collections.abc import Sequence, Set
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from metastore.catalog.image import EMPTY_IMAGE, Image
from metastore.kafka.admin import Admin
from metastore.kafka.settings import KafkaSettings
from metastore.log.backup import (
    Backup,
    StoredRecord,
    TopicShape,
    read_backup,
    read_records,
    topic_shape,
    write_backup,
)
from metastore.log.exceptions import RepairError, RewriteError
from metastore.log.record import IncompatibleRecordError, UnappliableRecordError
from metastore.log.replay import replay_encoded
from metastore.log.rewrite import Progress, note, quiesce, rewrite, verify
from metastore.log.state import Incarnation
from metastore.log.topic import command_topic_name


# -- finding what cannot be replayed -----------------------------------------------------------
@dataclass(frozen=True)
class Skipped:
    """A record left out, and why: REQUESTED (--skip-offset), CORRUPTED, INCOMPATIBLE (a newer
    record version) or UNAPPLIABLE (replaying it raised)."""

    offset: int
    key: str | None
    kind: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"offset": self.offset, "key": self.key, "kind": self.kind, "reason": self.reason}


def replay_records(image: Image, run: Sequence[StoredRecord]) -> tuple[Image, Skipped | None]:
    """Replay ``run`` as a node does (:func:`replay_encoded`); the image before the first record
    that fails, and that record."""
    result = replay_encoded(image, ((record.offset, record.value) for record in run))
    if result.error is None:
        return result.image, None
    record = run[len(result.applied)]
    kind = ("INCOMPATIBLE" if isinstance(result.error, IncompatibleRecordError)
            else "UNAPPLIABLE" if isinstance(result.error, UnappliableRecordError)
            else "CORRUPTED")
    return result.image, Skipped(record.offset, record.key_text(), kind, result.error.message)


def find_unreplayable(records: Sequence[StoredRecord],
                      leave_out: Set[int] = frozenset()) -> tuple[Image, list[Skipped]]:
    """Replay ``records`` without ``leave_out``, leaving out each record that fails as well; the
    resulting image and the records that failed, in order."""
    pending = [record for record in records if record.offset not in leave_out]
    image, failures, start = EMPTY_IMAGE, [], 0
    while start < len(pending):
        image, failure = replay_records(image, pending[start:])
        if failure is None:
            break
        failures.append(failure)
        start = next(i for i in range(start, len(pending)) if pending[i].offset == failure.offset) + 1
    return image, failures


@dataclass(frozen=True)
class RepairPlan:
    """What a repair keeps and leaves out, and the image the kept records replay to."""

    service_id: str
    topic: str
    topic_id: str
    shape: TopicShape
    records: tuple[StoredRecord, ...]
    skipped: tuple[Skipped, ...]
    left_in: tuple[Skipped, ...]
    """Records that fail to replay but were not asked to be skipped."""
    image: Image

    @property
    def kept(self) -> list[StoredRecord]:
        gone = {s.offset for s in self.skipped}
        return [record for record in self.records if record.offset not in gone]

    @property
    def refusal(self) -> str | None:
        if self.left_in:
            offsets = ", ".join(str(s.offset) for s in self.left_in)
            return (f"{len(self.left_in)} record(s) cannot be replayed (offsets {offsets}); pass "
                    "--skip-unappliable to leave them out, or --skip-offset for each")
        if not self.skipped:
            return "nothing to do: every committed record of the log replays"
        return None

    def to_json(self) -> dict[str, Any]:
        return {"serviceId": self.service_id, "topic": self.topic, "topicId": self.topic_id,
                "records": len(self.records),
                "endOffset": self.records[-1].offset + 1 if self.records else 0,
                "kept": len(self.records) - len(self.skipped),
                "skipped": [s.to_json() for s in self.skipped],
                "unappliableNotSkipped": [s.to_json() for s in self.left_in],
                "fingerprint": self.image.fingerprint, "sources": len(self.image.sources),
                "queries": len(self.image.queries), "refused": self.refusal}


def plan_repair(records: Sequence[StoredRecord], service_id: str, topic: str, topic_id: str,
                shape: TopicShape, skip_offsets: Set[int] = frozenset(),
                skip_unappliable: bool = False) -> RepairPlan:
    """Which records to keep; an offset in ``skip_offsets`` must hold a committed record."""
    by_offset = {record.offset: record for record in records}
    strangers = sorted(set(skip_offsets) - by_offset.keys())
    if strangers:
        end = records[-1].offset + 1 if records else 0
        raise RepairError(
            f"offset(s) {', '.join(map(str, strangers))} hold no committed record of {topic} "
            f"(its committed records end at offset {end}; the others are transaction markers or "
            "aborted records): see `metastore log dump`")
    requested = [Skipped(o, by_offset[o].key_text(), "REQUESTED", "--skip-offset")
                 for o in sorted(skip_offsets)]
    image, failures = find_unreplayable(records, skip_offsets)
    skipped = sorted([*requested, *(failures if skip_unappliable else [])], key=lambda s: s.offset)
    return RepairPlan(service_id, topic, topic_id, shape, tuple(records), tuple(skipped),
                      () if skip_unappliable else tuple(failures), image)


# -- the two operations ------------------------------------------------------------------------
@dataclass(frozen=True)
class RepairOptions:
    skip_offsets: frozenset[int] = frozenset()
    skip_unappliable: bool = False
    dry_run: bool = False
    confirmed: bool = False
    """--yes: fence, delete, re-create and write; without it nothing is touched."""


@dataclass(frozen=True)
class Rewritten:
    """What a repair or restore wrote."""

    backup: Path
    old_topic_id: str | None
    new_topic_id: str
    image: Image
    bad_record: Skipped | None = None

    def to_json(self, service_id: str, topic: str) -> dict[str, Any]:
        old = (None if self.old_topic_id is None
               else Incarnation(service_id, topic, self.old_topic_id).path())
        return {"backup": str(self.backup), "oldTopicId": self.old_topic_id,
                "newTopicId": self.new_topic_id, "fingerprint": self.image.fingerprint,
                "sources": len(self.image.sources), "queries": len(self.image.queries),
                "badRecord": None if self.bad_record is None else self.bad_record.to_json(),
                "queryCheckpoints": {
                    "old": old, "new": Incarnation(service_id, topic, self.new_topic_id).path()}}


@dataclass(frozen=True)
class RepairReport:
    plan: RepairPlan
    rewritten: Rewritten | None = None

    def to_json(self) -> dict[str, Any]:
        return {**self.plan.to_json(), "written": self.rewritten is not None,
                "result": None if self.rewritten is None
                else self.rewritten.to_json(self.plan.service_id, self.plan.topic)}


def repair(settings: KafkaSettings, service_id: str, backup: Path,
           options: RepairOptions | None = None, progress: Progress | None = None) -> RepairReport:
    """Plan a repair of the service's command log and, with ``options.confirmed``, carry it out:
    fence, back up every record to ``backup``, re-create the topic, write the kept records at
    their offsets, and check that the new log replays to the planned image."""
    options = options or RepairOptions()
    if backup.exists():
        raise RepairError(f"the backup file {backup} already exists; name a new file")
    if not backup.parent.is_dir():
        raise RepairError(f"the directory of the backup file, {backup.parent}, does not exist")
    topic = command_topic_name(service_id)
    admin = Admin(settings)
    if admin.describe(topic) is None:
        raise RepairError(f"service {service_id} has no command topic ({topic} does not exist)")
    writing = options.confirmed and not options.dry_run
    if writing:
        quiesce(settings, admin, service_id, topic, progress)
    topic_id = admin.topic_id(topic)
    records = read_records(settings, topic, f"{service_id}-log-repair-{time.time_ns()}")
    note(progress, f"read {len(records)} committed records of {topic}")
    plan = plan_repair(records, service_id, topic, topic_id, topic_shape(admin, topic),
                       options.skip_offsets, options.skip_unappliable)
    if not writing or plan.refusal is not None:
        return RepairReport(plan)
    write_backup(backup, Backup(service_id, topic, topic_id, plan.shape, plan.records,
                                datetime.now(UTC).isoformat(timespec="seconds")))
    note(progress, f"backed up {len(records)} records to {backup}")
    new_id = rewrite(settings, admin, service_id, topic, plan.shape, plan.kept, backup, progress)
    found = verify(settings, service_id, topic, plan.kept)
    image, failure = replay_records(EMPTY_IMAGE, found)
    if failure is not None or image.fingerprint != plan.image.fingerprint:
        problem = (f"offset {failure.offset} fails: {failure.reason}" if failure is not None
                   else f"it replays to {image.fingerprint}, not the planned "
                        f"{plan.image.fingerprint}")
        raise RewriteError(f"the repaired log does not replay as planned: {problem}. Restore it "
                           f"with `metastore log restore --backup {backup} --service-id "
                           f"{service_id} --yes`")
    return RepairReport(plan, Rewritten(backup, topic_id, new_id, image))


@dataclass(frozen=True)
class RestoreReport:
    backup: Backup
    path: Path
    current: int
    """Committed records the topic held before (0 when it did not exist)."""
    discarded: tuple[StoredRecord, ...]
    """Records of the current log the backup does not hold."""
    rewritten: Rewritten | None = None
    refusal: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"serviceId": self.backup.service_id, "topic": self.backup.topic,
                "backup": str(self.path), "backupTakenAt": self.backup.taken_at,
                "records": len(self.backup.records), "currentRecords": self.current,
                "discarded": [{"offset": r.offset, "key": r.key_text()} for r in self.discarded],
                "refused": self.refusal, "written": self.rewritten is not None,
                "result": None if self.rewritten is None
                else self.rewritten.to_json(self.backup.service_id, self.backup.topic)}


@dataclass(frozen=True)
class RestoreOptions:
    dry_run: bool = False
    confirmed: bool = False
    discard_newer: bool = False
    """Go on although the current log holds records the backup does not (they are lost)."""


def restore(settings: KafkaSettings, service_id: str, path: Path,
            options: RestoreOptions | None = None,
            progress: Progress | None = None) -> RestoreReport:
    """Write the records of the backup in ``path`` back into a re-created command topic, at their
    offsets (undoing a repair); with ``options.confirmed`` only."""
    options = options or RestoreOptions()
    backup = read_backup(path)
    topic = command_topic_name(service_id)
    if (backup.service_id, backup.topic) != (service_id, topic):
        raise RepairError(f"{path} is a backup of service {backup.service_id} ({backup.topic}), "
                          f"not of {service_id}")
    admin = Admin(settings)
    writing = options.confirmed and not options.dry_run
    if writing:
        quiesce(settings, admin, service_id, topic, progress)
    exists = admin.describe(topic) is not None
    old_id = admin.topic_id(topic) if exists else None
    current = (read_records(settings, topic, f"{service_id}-log-repair-{time.time_ns()}")
               if exists else [])
    held = {record.identity for record in backup.records}
    discarded = tuple(record for record in current if record.identity not in held)
    refusal = None
    if discarded and not options.discard_newer:
        refusal = (f"the current log holds {len(discarded)} record(s) the backup does not "
                   f"(offsets {', '.join(str(r.offset) for r in discarded[:20])}"
                   f"{', ...' if len(discarded) > 20 else ''}); pass --discard-newer to lose them")
    report = RestoreReport(backup, path, len(current), discarded, refusal=refusal)
    if not writing or refusal is not None:
        return report
    new_id = rewrite(settings, admin, service_id, topic, backup.shape, backup.records, path,
                     progress)
    found = verify(settings, service_id, topic, backup.records)
    image, failure = replay_records(EMPTY_IMAGE, found)
    return RestoreReport(backup, path, len(current), discarded,
                         Rewritten(path, old_id, new_id, image, failure))

