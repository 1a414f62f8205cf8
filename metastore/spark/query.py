"""Pull queries (``POST /query``) through the node's Spark, answered in ksqlDB's shape.

The SELECT is parsed with the ksqlDB dialect, analysed against the image (which also says what
it reads), transpiled by sqlglot to Spark SQL with every source it reads qualified by the service's
database, and run within a :class:`PullBudget`: a row limit (10,000 unless the query names one),
a size (the answer's JSON is counted row by row as Spark hands the rows over, and refused past
its bytes with no more rows converted; a partition Spark hands over is one task's result, held
whole by the driver and bounded by the session's ``spark.driver.maxResultSize``), and a time
(the query's Spark jobs run in a job group of their own, cancelled when it runs out). A
function call past its bound fails the query with the reason (:mod:`metastore.functions.bounds`).
So one query fails alone; the node and its other queries go on.
The answer is a :class:`QueryResult`; the endpoints write it in their shapes.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import decimal
import json
import threading
import uuid
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from py4j.protocol import Py4JNetworkError
from sqlglot import exp

from metastore.catalog.image import Image
from metastore.core.limits import RequestLimits
from metastore.engine.analysis import Analysis
from metastore.engine.overrides import NO_OVERRIDES, ConfigOverrides
from metastore.engine.pull_queries import check_select, result_keys
from metastore.functions import bounds
from metastore.functions import library as functions
from metastore.functions.registry import UntranslatableError
from metastore.spark.exceptions import (
    AnswerTooLargeError,
    PullQueryTimeoutError,
    SparkQueryError,
    SparkUnavailableError,
    UnsupportedQueryError,
)
from metastore.spark.views import object_name
from metastore.sql.parser import parse
from metastore.sql.statements import SelectStatement

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_LIMIT = 10_000
PULL_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class PullBudget:
    """What one pull query answered by Spark may cost."""

    max_bytes: int = RequestLimits().max_response_bytes
    """Bytes of the answer's rows as JSON; a larger answer is refused, not truncated."""
    timeout_seconds: float = PULL_TIMEOUT_SECONDS
    """Time its Spark jobs may run before they are cancelled."""


def struct_access(extract: exp.JSONExtract) -> exp.Bracket:
    """ksqlDB's ``a->b`` as Spark's struct field access ``a['B']``: a field, whatever ``a`` is
    named (Spark reads ``s.s`` as the column ``s`` of the source ``s`` where there is one)."""
    path = extract.expression
    field = path.name if isinstance(path, exp.Expr) else str(path)
    return exp.Bracket(this=extract.this, expressions=[
        exp.Literal.string(field.strip("$.").split(".")[-1].upper())])


def to_spark_sql(analysis: Analysis, database: str) -> str:
    """The analysed pull query as Spark SQL; rewrites the query's tree (its names and types are
    derived already)."""
    select = analysis.query.select
    for read in analysis.reads:
        read.table.set("this", exp.to_identifier(object_name(read.source.name), quoted=True))
        read.table.set("db", exp.to_identifier(database, quoted=True))
    def rewrite(node: exp.Expr) -> exp.Expr:
        return struct_access(node) if isinstance(node, exp.JSONExtract) else node

    try:
        functions.to_spark(select, functions.SparkContext(
            keep_undeclared=True, rewrite=rewrite, config={bounds.ON_EXCEEDED: bounds.FAIL}))
    except UntranslatableError as error:
        raise UnsupportedQueryError(f"Spark cannot run this query: {error}") from error
    if not select.args.get("limit"):
        select.set("limit", exp.Limit(expression=exp.Literal.number(DEFAULT_LIMIT)))
    return select.sql(dialect="spark")


@dataclass(frozen=True)
class QueryResult:
    """The answer to a pull query: its columns' names and SQL types, and its rows."""

    query_id: str
    names: tuple[str, ...]
    types: tuple[str, ...]
    rows: list[list[Any]]
    keys: frozenset[str] = frozenset()
    """The columns the header marks ``KEY`` (:func:`metastore.engine.pull_queries.
    result_keys`)."""

    @property
    def schema(self) -> str:
        """The columns as ksqlDB's ``/query`` header writes them: ```ID` INTEGER KEY, ...``."""
        return ", ".join(f"`{n}` {t}{' KEY' if n in self.keys else ''}"
                         for n, t in zip(self.names, self.types, strict=True))


def run_pull_query(spark: SparkSession, text: str, image: Image, database: str,
                   config: ConfigOverrides = NO_OVERRIDES) -> QueryResult:
    """Answer the pull query ``text`` after the statement validator's checks of a SELECT
    (:func:`metastore.engine.pull_queries.check_select`) under the request's ``config``."""
    return run_analysed(spark, check_pull_query(text, image, config), database)


def check_pull_query(text: str, image: Image, config: ConfigOverrides) -> Analysis:
    """The pull query ``text``, checked as the statement validator checks a SELECT
    (:func:`metastore.engine.pull_queries.check_select`) under the request's ``config``."""
    statements = parse(text)
    if len(statements) != 1 or not isinstance(statements[0], SelectStatement):
        raise UnsupportedQueryError("/query takes exactly one SELECT statement")
    statement = statements[0]
    if statement.query.emit_changes:
        raise UnsupportedQueryError("A push query (EMIT CHANGES) is not a pull query")
    return check_select(statement, image.sources, image.types, image.queries, config)


def new_query_id() -> str:
    return f"query_{uuid.uuid4().hex[:12]}"


def run_analysed(spark: SparkSession, analysis: Analysis, database: str,
                 query_id: str | None = None, budget: PullBudget | None = None) -> QueryResult:
    """Answer a checked pull query on Spark within ``budget`` (it rewrites the analysed query's
    tree)."""
    budget = budget or PullBudget()
    query_id = query_id or new_query_id()
    sql = to_spark_sql(analysis, database)
    try:
        return _answer(spark, sql, analysis, query_id, budget)
    except (Py4JNetworkError, ConnectionError) as error:  # Spark itself, not the query, failed
        raise SparkUnavailableError(f"Spark is not available on this node: {error}") from error


def _answer(spark: SparkSession, sql: str, analysis: Analysis, query_id: str,
            budget: PullBudget) -> QueryResult:
    keys = result_keys(analysis)
    with _job_group(spark, query_id, budget.timeout_seconds) as timed_out:
        try:
            frame = spark.sql(sql)
            stream = cast("Generator[Any, None, None]", frame.toLocalIterator())
            with contextlib.closing(stream):
                try:
                    rows = bounded_rows(stream, budget.max_bytes)
                except AnswerTooLargeError:
                    _abandon(spark, query_id, stream)
                    raise
        except (AnswerTooLargeError, Py4JNetworkError, ConnectionError):
            raise
        except Exception as error:  # Spark's own analysis and runtime errors, as the client's
            if timed_out.is_set():
                raise PullQueryTimeoutError(
                    f"The query ran longer than {budget.timeout_seconds:g} s and was cancelled; "
                    "ask for less (a narrower WHERE, a LIMIT).") from error
            raise SparkQueryError.of("run the query", error) from error
    names = [column.name for column in analysis.columns] if len(analysis.columns) == len(
        frame.columns) else list(frame.columns)
    types = [column.type.sql() for column in analysis.columns] if len(names) == len(
        analysis.columns) else ["STRING"] * len(names)
    return QueryResult(query_id, tuple(names), tuple(types), rows, keys)


def _abandon(spark: SparkSession, group: str, stream: Generator[Any, None, None]) -> None:
    """End an answer that is no longer wanted: its jobs are cancelled (closing the row iterator
    alone lets the task of the partition being read run on to its end, holding a core), then
    the iterator is closed. PySpark then raises what the ended job met (the job cancelled, or
    ``TaskResultLost`` for a task in flight), which is not the answer's error."""
    with contextlib.suppress(Exception):
        spark.sparkContext.cancelJobGroup(group)
    with contextlib.suppress(Exception):
        stream.close()


@contextlib.contextmanager
def _job_group(spark: SparkSession, group: str, timeout: float) -> Iterator[threading.Event]:
    """Run this thread's Spark jobs in the job group ``group``, cancelled (their tasks
    interrupted) after ``timeout`` seconds; the event yielded says whether that happened."""
    context = spark.sparkContext
    timed_out = threading.Event()

    def cancel() -> None:
        timed_out.set()
        with contextlib.suppress(Exception):  # Spark is gone: nothing left to cancel
            context.cancelJobGroup(group)

    context.setJobGroup(group, "pull query", interruptOnCancel=True)
    timer = threading.Timer(timeout, cancel)
    timer.daemon = True
    timer.start()
    try:
        yield timed_out
    finally:
        timer.cancel()
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


def bounded_rows(rows: Iterable[Any], max_bytes: int) -> list[list[Any]]:
    """The rows as JSON values, counted as they arrive: past ``max_bytes`` of JSON no more are
    converted (the caller closes the iterator, which ends its Spark job)."""
    answer: list[list[Any]] = []
    size = 0
    for row in rows:
        values = [json_value(v) for v in row]
        size += len(json.dumps(values, separators=(",", ":"), default=str)) + 1
        if size > max_bytes:
            raise AnswerTooLargeError(
                f"The answer is larger than {max_bytes} bytes after {len(answer)} rows; ask "
                "for fewer rows (a LIMIT, a narrower WHERE) or fewer columns.")
        answer.append(values)
    return answer


def json_value(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, datetime.datetime):
        return int(value.replace(tzinfo=datetime.UTC).timestamp() * 1000)
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, list):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if hasattr(value, "asDict"):
        return {k: json_value(v) for k, v in value.asDict().items()}
    return value
