"""Where persistent queries' Spark checkpoints live: a local directory, or any Hadoop file system
URI (``hdfs://``, ``s3a://``, ``abfs://``, ``file://``...) reached through Spark's own Hadoop
``FileSystem`` and configuration.

A root holds one directory per query (``<root>/<scope>/<query id>``); the query runner asks a root
for a query's directory, for the queries that have one (to delete those of terminated queries),
and a directory whether its query keeps tables, or windows and stream joins, as keyed state (a
mark file each, beside Spark's ``offsets``). Every node and every Spark worker must see the
same root: the driver writes a query's offsets and commits there, the executors its state
stores.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TABLE_STATE_MARK = "metastore-table-state"
"""A file in the checkpoint of a query whose table sides are keyed state."""
STREAM_STATE_MARK = "metastore-stream-state"
"""A file in the checkpoint of a query whose SESSION windows, EMIT FINAL windows or unmatched
outer stream-stream join records are keyed state."""
WINDOWED_PARTITIONING_MARK = "metastore-windowed-partitioning"
"""A file in the checkpoint of a query whose windowed sink's records go to the partition of their
key without its window (a query started before that keeps Kafka's default partitioner, so a
window's records stay in one partition)."""
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")
"""A URI's scheme (``hdfs://nn/x``, and ``file:/x`` as Hadoop prints paths)."""


class CheckpointDir(Protocol):
    """One query's checkpoint directory."""

    @property
    def location(self) -> str:
        """What Spark's ``checkpointLocation`` gets."""
        ...

    def prepare(self, table_state: bool, stream_state: bool = False,
                windowed_partitioning: bool = False) -> None:
        """Make the parent (and, for a query that keeps tables or its streams' windows and joins
        as state, or partitions its windowed sink by key, the directory and that mark) before
        Spark starts the query."""
        ...

    def holds_table_state(self) -> bool:
        """Whether the query may keep tables as keyed state (joins, table aggregations): it is
        new, or it started so. A checkpoint of a query that re-read its tables keeps that plan
        (Spark cannot resume it with other sources and state)."""
        ...

    def holds_stream_state(self) -> bool:
        """Whether the query may keep SESSION windows, EMIT FINAL windows and the unmatched
        records of outer stream-stream joins as keyed state: it is new, or it started so. A
        checkpoint of a query that replayed its streams keeps that plan."""
        ...

    def holds_windowed_partitioning(self) -> bool:
        """Whether the query may partition its windowed sink by the key without its window: it
        is new, or it started so."""
        ...

    def read_text(self, relative: str) -> str:
        """A file of the checkpoint (``offsets/<batch id>``...), as UTF-8 text."""
        ...

    def delete(self) -> None:
        ...


class CheckpointRoot(Protocol):
    """The directory of every query's checkpoint directory."""

    @property
    def location(self) -> str: ...

    def scoped(self, scope: str) -> CheckpointRoot:
        """The root of one command log's queries (``scope``: the service and its incarnation)."""
        ...

    def query(self, query_id: str) -> CheckpointDir: ...

    def query_ids(self) -> list[str]:
        """The names of the directories under the root (none when it does not exist)."""
        ...


def is_uri(root: str) -> bool:
    """Whether ``root`` names a Hadoop file system (``scheme:...``) rather than a local path."""
    return _SCHEME.match(root) is not None


def checkpoint_root(root: str | Path,
                    spark: Callable[[], SparkSession | None] | None = None) -> CheckpointRoot:
    """The root at ``root``: a local directory, or a Hadoop URI reached through ``spark``'s
    session (required for a URI)."""
    text = str(root)
    if not is_uri(text):
        return LocalRoot(Path(text))
    if spark is None:
        raise ValueError(f"a checkpoint URI needs Spark: {text}")
    return HadoopRoot(text.rstrip("/"), spark)


def _marks(table_state: bool, stream_state: bool, windowed_partitioning: bool
           ) -> tuple[tuple[bool, str], ...]:
    return ((table_state, TABLE_STATE_MARK), (stream_state, STREAM_STATE_MARK),
            (windowed_partitioning, WINDOWED_PARTITIONING_MARK))


# -- a local directory -----------------------------------------------------------------------------
@dataclass(frozen=True)
class LocalDir:
    path: Path

    @property
    def location(self) -> str:
        """A ``file:`` URI: a bare path would be resolved against Hadoop's default file system,
        HDFS wherever ``HADOOP_CONF_DIR`` names one, where this class does not look."""
        return self.path.resolve().as_uri()

    def prepare(self, table_state: bool, stream_state: bool = False,
                windowed_partitioning: bool = False) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for kept, mark in _marks(table_state, stream_state, windowed_partitioning):
            if kept:
                self.path.mkdir(exist_ok=True)
                (self.path / mark).touch()

    def holds_table_state(self) -> bool:
        return not (self.path / "offsets").is_dir() or (self.path / TABLE_STATE_MARK).exists()

    def holds_stream_state(self) -> bool:
        return not (self.path / "offsets").is_dir() or (self.path / STREAM_STATE_MARK).exists()

    def holds_windowed_partitioning(self) -> bool:
        return not (self.path / "offsets").is_dir() or (
            self.path / WINDOWED_PARTITIONING_MARK).exists()

    def read_text(self, relative: str) -> str:
        return (self.path / relative).read_text(encoding="utf-8")

    def delete(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


@dataclass(frozen=True)
class LocalRoot:
    path: Path

    @property
    def location(self) -> str:
        return self.path.resolve().as_uri()

    def scoped(self, scope: str) -> LocalRoot:
        return LocalRoot(self.path / scope)

    def query(self, query_id: str) -> LocalDir:
        return LocalDir(self.path / query_id)

    def query_ids(self) -> list[str]:
        try:
            return sorted(d.name for d in self.path.iterdir() if d.is_dir())
        except OSError:
            return []


# -- a Hadoop file system --------------------------------------------------------------------------
@dataclass(frozen=True)
class HadoopDir:
    uri: str
    spark: Callable[[], SparkSession | None]

    @property
    def location(self) -> str:
        return self.uri

    def _at(self, relative: str = "") -> tuple[Any, Any]:
        return _hadoop(self.spark, f"{self.uri}/{relative}" if relative else self.uri)

    def prepare(self, table_state: bool, stream_state: bool = False,
                windowed_partitioning: bool = False) -> None:
        path, fs = self._at()
        fs.mkdirs(path.getParent())
        for kept, mark in _marks(table_state, stream_state, windowed_partitioning):
            if kept:
                fs.mkdirs(path)
                fs.create(self._at(mark)[0], True).close()

    def holds_table_state(self) -> bool:
        return self._holds(TABLE_STATE_MARK)

    def holds_stream_state(self) -> bool:
        return self._holds(STREAM_STATE_MARK)

    def holds_windowed_partitioning(self) -> bool:
        return self._holds(WINDOWED_PARTITIONING_MARK)

    def _holds(self, mark: str) -> bool:
        offsets, fs = self._at("offsets")
        return not (fs.exists(offsets) and fs.getFileStatus(offsets).isDirectory()) or bool(
            fs.exists(self._at(mark)[0]))

    def read_text(self, relative: str) -> str:
        path, fs = self._at(relative)
        stream = fs.open(path)
        try:
            return bytes(stream.readAllBytes()).decode("utf-8")
        finally:
            stream.close()

    def delete(self) -> None:
        path, fs = self._at()
        fs.delete(path, True)


@dataclass(frozen=True)
class HadoopRoot:
    uri: str
    spark: Callable[[], SparkSession | None]

    @property
    def location(self) -> str:
        return self.uri

    def scoped(self, scope: str) -> HadoopRoot:
        return HadoopRoot(f"{self.uri}/{scope}", self.spark)

    def query(self, query_id: str) -> HadoopDir:
        return HadoopDir(f"{self.uri}/{query_id}", self.spark)

    def query_ids(self) -> list[str]:
        path, fs = _hadoop(self.spark, self.uri)
        if not fs.exists(path):
            return []
        return sorted(str(status.getPath().getName()) for status in fs.listStatus(path)
                      if status.isDirectory())


def _hadoop(spark: Callable[[], SparkSession | None], uri: str) -> tuple[Any, Any]:
    """Hadoop's ``Path`` of ``uri`` and its ``FileSystem``, configured as Spark's session is
    (``spark.hadoop.*`` settings: credentials, endpoints)."""
    session = spark()
    if session is None:
        raise RuntimeError("Spark is not running: the query checkpoints are out of reach")
    jvm = session.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(uri)
    return path, path.getFileSystem(session.sparkContext._jsc.hadoopConfiguration())

