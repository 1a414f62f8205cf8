"""Tables kept materialized on a node, so that pull queries on them answer in milliseconds, as
ksqlDB answers them from its state stores.

A :class:`TableStore` is a Spark streaming query over a table's topic that decodes each record
with the same SQL as the table's Spark view (:func:`metastore.spark.views.decode_select`) and
keeps the latest row of each Kafka key in memory (a tombstone deletes it), with the offsets it
has read up to. :class:`TableStores` starts one the first time a table is queried, and stops
the least recently used when more than ``max_tables`` are kept, one idle longer than
``idle_seconds``, and one whose table was dropped or replaced. A store holding more than
``max_rows`` rows stops: its table's queries go back to Spark.

:func:`lookup_of` says which pull queries a store answers: a SELECT of a table's columns (or
``*``), and no WHERE, key lookups (``K = literal``, ``K IN (...)``, ORs of them; every key
column of a multi-column key compared), or range scans (``K > literal``, ``K BETWEEN a AND b``,
ANDs of them), with a windowed table's bounds on WINDOWSTART and WINDOWEND. Anything else is
answered by Spark.
A store answers only once it has read its topic up to the last stable offsets the query saw
when it started, so a pull query sees every record committed before it (read-your-writes, as
the Spark batch read gives); a store that cannot catch up in ``catch_up_seconds`` leaves the
query to Spark.
"""

from __future__ import annotations

import logging
import math
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from metastore.catalog.model import DataSource
from metastore.engine.analysis import Analysis
from metastore.engine.pull_queries import result_keys
from metastore.planner.steps import Step
from metastore.runtime import job
from metastore.runtime.checkpoints import LocalDir
from metastore.spark.query import QueryResult, json_value
from metastore.spark.types import quote
from metastore.spark.views import WINDOW, decode_problem, decode_select
from metastore.sql import types as ty
from metastore.sql.statements import SourceKind

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)

EndOffsets = Callable[[str], Mapping[int, int] | None]
"""The last stable offset of each partition of a topic (None when Kafka did not answer)."""

_PARTITION, _OFFSET, _DELETED, _KEY = "__MS_P", "__MS_O", "__MS_DELETED", "__MS_K"
_INTEGERS = (ty.INTEGER, ty.BIGINT)


@dataclass(frozen=True)
class StoreSettings:
    max_tables: int = 8
    max_rows: int = 2_000_000
    idle_seconds: float = 600.0
    catch_up_seconds: float = 5.0
    trigger_ms: int = 100
    retry_seconds: float = 60.0
    """How long a table whose store failed is left to Spark before a new store is tried."""
    max_records_per_batch: int = 50_000


@dataclass(frozen=True)
class Lookup:
    """What a pull query reads from a store: the columns it selects (by index in the table's
    columns) and the keys it looks up (None: every row)."""

    names: tuple[str, ...]
    types: tuple[str, ...]
    indexes: tuple[int, ...]
    keys: frozenset[tuple[Any, ...]] | None
    bounds: tuple[tuple[int, str, Any], ...] = ()
    """Conditions rows must meet: ranges of key columns, and a windowed table's bounds on its
    rows' windows in millis, as (index, operator, value)."""

    def admits(self, row: tuple[Any, ...]) -> bool:
        """Whether ``row`` meets every bound; a NULL meets none, as no SQL comparison with
        NULL is true."""
        return all(row[index] is not None and _COMPARE[operator](row[index], value)
                   for index, operator, value in self.bounds)


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "EQ": lambda a, b: a == b, "GT": lambda a, b: a > b, "GTE": lambda a, b: a >= b,
    "LT": lambda a, b: a < b, "LTE": lambda a, b: a <= b}
_FLIPPED = {"EQ": "EQ", "GT": "LT", "GTE": "LTE", "LT": "GT", "LTE": "GTE"}
_BOUNDS = ("WINDOWSTART", "WINDOWEND")


def row_columns(source: DataSource) -> list[str]:
    """The columns of a store's rows: the key columns, a windowed table's window bounds, the
    value columns (the order of the table's Spark view)."""
    keys = [c.name for c in source.columns if c.is_key]
    bounds = list(_BOUNDS) if source.window is not None else []
    return keys + bounds + [c.name for c in source.columns if not c.is_key]


def lookup_of(analysis: Analysis) -> Lookup | None:
    """The store lookup answering the pull query ``analysis``, or None when only Spark can."""
    query = analysis.query
    select = query.select
    if len(analysis.reads) != 1 or analysis.joins or analysis.aggregate:
        return None
    source = analysis.reads[0].source
    if source.kind is not SourceKind.TABLE:
        return None
    if any(select.args.get(c) for c in ("limit", "order", "distinct", "group", "having")):
        return None
    names = row_columns(source)
    indexes = []
    for _, expression in analysis.projection:
        if not isinstance(expression, exp.Column) or expression.name not in names:
            return None
        indexes.append(names.index(expression.name))
    where = select.args.get("where")
    keys: frozenset[tuple[Any, ...]] | None = None
    bounds: list[tuple[str, str, Any]] = []
    if where is not None:
        found = _keys(where.this, source)
        if found is None:
            return None
        keys, bounds = found
    columns = analysis.columns
    return Lookup(tuple(c.name for c in columns), tuple(c.type.sql() for c in columns),
                  tuple(indexes), keys,
                  tuple((names.index(name), op, value) for name, op, value in bounds))


def _keys(where: exp.Expr, source: DataSource
          ) -> tuple[frozenset[tuple[Any, ...]] | None, list[tuple[str, str, Any]]] | None:
    """The key tuples a WHERE of ORs of key lookups selects (None: a range scan, every row),
    and the bounds rows must also meet: ranges of key columns and a windowed table's bounds on
    its windows (in a WHERE without OR); or None for any other WHERE."""
    key_columns = source.key_columns
    found: set[tuple[Any, ...]] = set()
    disjuncts = _split(where, exp.Or)
    bounds: list[tuple[str, str, Any]] = []
    for disjunct in disjuncts:
        values: dict[str, list[Any]] = {}
        for term in _split(disjunct, exp.And):
            ranged = _ranges(term, source) if len(disjuncts) == 1 else None
            if ranged is not None:
                bounds.extend(ranged)
                continue
            compared = _compared(term, source)
            if compared is None or compared[0] in values:
                return None
            values[compared[0]] = compared[1]
        if not values and bounds:
            return None, bounds  # a range scan: the one disjunct bounds the rows
        if set(values) != {c.name for c in key_columns}:
            return None
        combos: list[tuple[Any, ...]] = [()]
        for column in key_columns:
            combos = [(*combo, value) for combo in combos for value in values[column.name]]
            if len(combos) > 1_000:
                return None
        found.update(combos)
    return frozenset(found), bounds


def _ranges(term: exp.Expr, source: DataSource) -> list[tuple[str, str, Any]] | None:
    """The bounds of ``column <op> literal`` (either way round, ``<op>`` one of < <= > >=, or
    = for a window bound) and ``column BETWEEN literal AND literal``, where the column is a
    key column or a windowed table's WINDOWSTART or WINDOWEND; else None."""
    if isinstance(term, exp.Between):
        low = _ranges(exp.GTE(this=term.this, expression=term.args["low"]), source)
        high = _ranges(exp.LTE(this=term.this, expression=term.args["high"]), source)
        return None if low is None or high is None else low + high
    operator = type(term).__name__.upper()
    if operator not in _COMPARE or not isinstance(term, exp.Binary):
        return None
    column, literal = term.this, term.expression
    if not isinstance(column, exp.Column):
        column, literal, operator = literal, column, _FLIPPED[operator]
    if not isinstance(column, exp.Column) or column.table:
        return None
    if source.window is not None and column.name in _BOUNDS:
        sql_type: ty.SqlType = ty.BIGINT
    else:
        key = next((c for c in source.key_columns if c.name == column.name), None)
        if key is None or operator == "EQ":  # a key's = is a lookup, not a range
            return None
        sql_type = key.type
    value = _literal(literal, sql_type)
    return None if value is _NOT_LITERAL else [(column.name, operator, value)]


def _split(node: exp.Expr, kind: type[exp.Expr]) -> list[exp.Expr]:
    node = node.unnest() if isinstance(node, exp.Paren) else node
    if isinstance(node, kind):
        return [*_split(node.this, kind), *_split(node.expression, kind)]
    return [node]


def _compared(term: exp.Expr, source: DataSource) -> tuple[str, list[Any]] | None:
    """``KEY = literal`` or ``KEY IN (literals)``: the key column and its values."""
    if isinstance(term, exp.EQ):
        column, literals = term.this, [term.expression]
        if not isinstance(column, exp.Column):
            column, literals = term.expression, [term.this]
    elif isinstance(term, exp.In) and not term.args.get("query"):
        column, literals = term.this, list(term.expressions)
    else:
        return None
    if not isinstance(column, exp.Column) or column.table:
        return None
    key = next((c for c in source.key_columns if c.name == column.name), None)
    if key is None:
        return None
    values = [_literal(literal, key.type) for literal in literals]
    if any(value is _NOT_LITERAL for value in values):
        return None
    return key.name, values


_NOT_LITERAL = object()


def _literal(node: exp.Expr, sql_type: ty.SqlType) -> Any:
    """The value a literal compares equal to in a column of ``sql_type``, as the store holds
    values (:func:`metastore.spark.query.json_value`); only exact matches of type."""
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and sql_type in _INTEGERS:
        value = _literal(node.this, sql_type)
        return -value if isinstance(value, int) else _NOT_LITERAL
    if not isinstance(node, exp.Literal):
        return _NOT_LITERAL
    if node.is_string:
        return node.this if sql_type == ty.STRING else _NOT_LITERAL
    text = str(node.this)
    if sql_type in _INTEGERS and text.lstrip("-").isdigit():
        return int(text)
    return _NOT_LITERAL


@dataclass
class TableStore:
    """The latest row per key of one table, read by a Spark streaming query."""

    source: DataSource
    checkpoint: Path
    max_rows: int
    rows: dict[Any, tuple[Any, ...]] = field(default_factory=dict)
    by_key: dict[tuple[Any, ...], set[Any]] = field(default_factory=dict)
    positions: dict[int, int] = field(default_factory=dict)
    used: float = field(default_factory=time.monotonic)
    failed: str | None = None
    handle: StreamingQuery | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, spark: SparkSession, kafka_options: Mapping[str, str],
              settings: StoreSettings) -> None:
        view = f"store_{abs(hash((self.source.name, self.checkpoint))) % 10 ** 12}"
        extra: tuple[str, ...] = (f"partition AS {_PARTITION}", f"offset AS {_OFFSET}",
                                  f"value IS NULL AS {_DELETED}", f"key AS {_KEY}")
        if self.source.window is not None:
            extra += tuple(f"unix_millis({WINDOW}.{bound}) AS {quote(name)}"
                           for bound, name in (("start", _BOUNDS[0]), ("end", _BOUNDS[1])))
        steps = (Step(f"{view}_raw", topic=self.source.topic),
                 Step(view, decode_select(self.source, quote(f"{view}_raw"), extra=extra)))
        self.handle = job.start_stream(spark, steps, view, self.checkpoint, kafka_options,
                                       self._apply, trigger_ms=settings.trigger_ms,
                                       max_records_per_batch=settings.max_records_per_batch,
                                       name=f"store_{self.source.name}")

    def _apply(self, rows: DataFrame, batch_id: int) -> None:
        """One micro-batch: each record in offset order, then the offsets it read up to."""
        ends = job.micro_batch_ends(LocalDir(self.checkpoint), batch_id).get(self.source.topic, {})
        records = rows.collect()
        columns = row_columns(self.source)
        keys = range(len(self.source.key_columns))  # a row's key columns come first
        with self.lock:
            for record in sorted(records, key=lambda r: (r[_PARTITION], r[_OFFSET])):
                raw = bytes(record[_KEY])
                decoded = tuple(json_value(record[name]) for name in columns)
                old = self.rows.pop(raw, None)
                if old is not None:
                    self._unindex(tuple(old[i] for i in keys), raw)
                if not record[_DELETED]:
                    self.rows[raw] = decoded
                    self.by_key.setdefault(tuple(decoded[i] for i in keys), set()).add(raw)
            self.positions.update({int(p): int(o) for p, o in ends.items()})
            if len(self.rows) > self.max_rows:
                self.failed = f"more than {self.max_rows} rows"
                self.rows.clear()
                self.by_key.clear()

    def _unindex(self, key: tuple[Any, ...], raw: Any) -> None:
        holders = self.by_key.get(key)
        if holders is not None:
            holders.discard(raw)
            if not holders:
                del self.by_key[key]

    def alive(self) -> bool:
        """Whether the store still reads its topic (its Spark query did not fail)."""
        handle = self.handle
        if self.failed is None and handle is not None and not handle.isActive:
            self.failed = job.failure(handle) or "its Spark query stopped"
        return self.failed is None

    def caught_up(self, ends: Mapping[int, int]) -> bool:
        with self.lock:
            return all(self.positions.get(p, 0) >= end for p, end in ends.items() if end > 0)

    def read(self, lookup: Lookup) -> list[list[Any]]:
        self.used = time.monotonic()
        with self.lock:
            if lookup.keys is None:
                found = list(self.rows.values())
            else:
                found = [self.rows[raw] for key in lookup.keys
                         for raw in self.by_key.get(key, ())]
        return [[row[i] for i in lookup.indexes] for row in found if lookup.admits(row)]

    def stop(self) -> None:
        handle, self.handle = self.handle, None
        try:
            if handle is not None:
                handle.stop()
        except Exception as error:  # Spark already gone
            log.warning("table store of %s: stopping failed: %s", self.source.name, error)
        shutil.rmtree(self.checkpoint, ignore_errors=True)


class TableStores:
    """The tables a node keeps materialized for pull queries (see the module's docstring)."""

    def __init__(self, spark: Callable[[], SparkSession | None], kafka_options: Mapping[str, str],
                 root: Path, end_offsets: EndOffsets, settings: StoreSettings | None = None,
                 close: Callable[[], None] | None = None) -> None:
        """``close``: frees what ``end_offsets`` holds, when the stores stop."""
        self._spark = spark
        self._close = close
        self.answered = 0
        """Pull queries answered from a store (the rest went to Spark)."""
        self._kafka_options = dict(kafka_options)
        self._root = root
        self._end_offsets = end_offsets
        self._settings = settings or StoreSettings()
        self._stores: dict[str, TableStore] = {}
        self._failed: dict[str, float] = {}
        self._lock = threading.Lock()
        shutil.rmtree(root, ignore_errors=True)  # of a node that did not stop cleanly

    @property
    def tables(self) -> int:
        with self._lock:
            return len(self._stores)

    def answer(self, analysis: Analysis, query_id: str) -> QueryResult | None:
        """The pull query's answer from the table's store, or None when Spark must answer."""
        lookup = lookup_of(analysis)
        if lookup is None:
            return None
        source = analysis.reads[0].source
        if decode_problem(source) is not None:
            return None
        ends = self._end_offsets(source.topic)
        store = self._store(source)
        if store is None or ends is None:
            return None
        deadline = time.monotonic() + self._settings.catch_up_seconds
        waits = 0
        while not store.caught_up(ends):
            if (waits % 20 == 0 and not store.alive()) or time.monotonic() > deadline:
                return None
            waits += 1
            time.sleep(0.005)
        rows = store.read(lookup)
        self.answered += 1
        return QueryResult(query_id, lookup.names, lookup.types, rows, result_keys(analysis))

    def _store(self, source: DataSource) -> TableStore | None:
        spark = self._spark()
        if spark is None:
            return None
        stale: list[TableStore] = []
        now = time.monotonic()
        with self._lock:
            store = self._stores.get(source.name)
            if store is not None and store.failed is not None:
                self._failed[source.name] = now
            if store is not None and (store.source != source or store.failed is not None):
                stale.append(self._stores.pop(source.name))
                store = None
            resting = store is None and now - self._failed.get(source.name, -math.inf) < (
                self._settings.retry_seconds)
            for name, other in list(self._stores.items()):
                if now - other.used > self._settings.idle_seconds:
                    stale.append(self._stores.pop(name))
            fresh = store is None and not resting
            if fresh:
                while len(self._stores) >= self._settings.max_tables:
                    oldest = min(self._stores, key=lambda n: self._stores[n].used)
                    stale.append(self._stores.pop(oldest))
                store = TableStore(source, self._root / f"{source.name}-{time.time_ns()}",
                                   self._settings.max_rows)
                self._stores[source.name] = store
        for old in stale:
            old.stop()
        if store is None:
            return None
        if fresh:
            try:
                store.start(spark, self._kafka_options, self._settings)
            except Exception as error:  # Spark refused the store: Spark answers instead
                log.warning("table store of %s could not start: %s", source.name, error)
                store.failed = str(error)[:300]
                return None
            log.info("table %s is now materialized for pull queries", source.name)
        return store

    def positions(self) -> dict[str, dict[str, list[int]]]:
        """How far each store has read its table's topic: ``{table: {partition: [read up
        to, end offset]}}``, the end as its Spark query last saw it (no Kafka request: the
        heartbeat asks); a store before its first trigger is left out."""
        with self._lock:
            stores = [store for store in self._stores.values() if store.failed is None]
        found: dict[str, dict[str, list[int]]] = {}
        for store in stores:
            handle = store.handle
            try:
                latest = job.latest_offsets(handle) if handle is not None else {}
            except Exception as error:  # Spark going away: the store is left out
                log.debug("table store of %s: no progress: %s", store.source.name, error)
                continue
            ends = {p: o for (topic, p), o in latest.items() if topic == store.source.topic}
            if not ends:
                continue
            with store.lock:
                read = dict(store.positions)
            found[store.source.name] = {str(p): [read.get(p, 0), end]
                                        for p, end in sorted(ends.items())}
        return found

    def spark_lost(self) -> None:
        """Spark died: forget every store (their queries died with it); the next pull query
        of a table starts a new one on the new session."""
        with self._lock:
            stores = list(self._stores.values())
            self._stores.clear()
        for store in stores:
            store.stop()

    def stop(self) -> None:
        self.spark_lost()
        if self._close is not None:
            self._close()
