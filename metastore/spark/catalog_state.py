"""What a persistent Spark catalog holds, remembered beside it so a restart need not ask Spark.

After each reconcile that changed a persistent catalog, the projection writes the objects Spark
reported back (names, kinds, spec hashes, schemas) to a file next to the catalog's Derby database,
tagged with the database's name and the identity (device, inode) of the Derby directory. A
restarted node whose file is intact and whose catalog is still that directory takes the file as
the catalog's contents: when the image wants exactly that, it makes no Spark call at all. The file
is removed before the catalog is changed, so a crash in between leaves no file, and the next start
reads the catalog back from Spark.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

FORMAT = 1


@dataclass(frozen=True)
class SparkObject:
    """An object as Spark reports it."""

    name: str
    is_view: bool
    spec: str | None
    schema: str


class CatalogStateFile:
    def __init__(self, path: Path, catalog_dir: Path, database: str) -> None:
        self.path = path
        self._catalog_dir = catalog_dir
        self._database = database

    def _identity(self) -> list[int] | None:
        try:
            found = os.stat(self._catalog_dir)
        except OSError:
            return None
        return [found.st_dev, found.st_ino]

    def load(self) -> dict[str, SparkObject] | None:
        """The remembered objects, or None when there is no usable file."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as error:
            log.warning("ignoring %s: %s", self.path, error)
            return None
        identity = self._identity()
        if (not isinstance(data, dict) or data.get("format") != FORMAT or identity is None
                or data.get("catalog") != identity or data.get("database") != self._database):
            log.info("%s does not describe this catalog; reading the catalog back from Spark",
                     self.path)
            return None
        try:
            return {name: SparkObject(name, bool(is_view), spec, schema)
                    for name, is_view, spec, schema in data["objects"]}
        except (KeyError, TypeError, ValueError) as error:
            log.warning("ignoring %s: %s", self.path, error)
            return None

    def save(self, objects: Mapping[str, SparkObject]) -> None:
        identity = self._identity()
        if identity is None:
            return
        document = {"format": FORMAT, "database": self._database, "catalog": identity,
                    "objects": [[o.name, o.is_view, o.spec, o.schema]
                                for o in sorted(objects.values(), key=lambda o: o.name)]}
        partial = self.path.with_name(f".{self.path.name}.tmp")
        partial.write_text(json.dumps(document), encoding="utf-8")
        partial.replace(self.path)

    def forget(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
