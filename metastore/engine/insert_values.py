"""ksqlDB's rules for INSERT INTO ... VALUES, in its order of checks.

While it prepares the statement (its AST builder and ``InsertValues``): a qualified reference
names no source (there is none), and the columns listed, if any, are as many as the values.
Then ``InsertValuesExecutor``: the target exists (with a hint at a name differing in case), is
not windowed, not read-only, and none of the columns set is a HEADER column. Then building the
record (``GenericRecordFactory``, its errors prefixed with ``Failed to insert values into``):
a value for each column, every column known (ROWTIME included), no ROWPARTITION nor ROWOFFSET,
no value that references a column, and a table's key columns all set.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from metastore.catalog.exceptions import QueryError, SourceNotFoundError, TopicError
from metastore.catalog.model import DataSource
from metastore.engine import alternatives, references, topics
from metastore.engine.pseudo_columns import NOT_INSERTABLE, PSEUDO_COLUMNS
from metastore.functions import operators
from metastore.functions.registry import TIME_UNITS
from metastore.sql.statements import ColumnRole, InsertValues, SourceKind

_HEADER_ROLES = (ColumnRole.HEADER, ColumnRole.HEADERS)


def check_statement(statement: InsertValues) -> None:
    """What ksqlDB refuses while it prepares the statement, before looking at the target."""
    references.check_qualifiers(statement.values, known=())
    if statement.columns and len(statement.columns) != len(statement.values):
        raise QueryError("Failed to prepare statement: Expected number columns and values to "
                         f"match: {len(statement.columns)}, {len(statement.values)}")


def target(name: str, sources: Mapping[str, DataSource]) -> DataSource:
    """The source named ``name`` values go to (``InsertValuesExecutor.getDataSource``): known,
    not windowed, and its topic not one of another system's read-only topics."""
    found = sources.get(name)
    if found is None:
        raise SourceNotFoundError(
            f"Cannot insert values into an unknown stream/table: `{name}`"
            f"{alternatives.hint(name, sources.values())}", name)
    if found.window is not None:
        raise QueryError("Cannot insert values into windowed stream/table!", found.name)
    if topics.READ_ONLY.fullmatch(found.topic) is not None:
        raise TopicError(f"Cannot insert values into read-only topic: {found.topic}", found.topic)
    return found


def check_writable(source: DataSource) -> None:
    """A SOURCE stream or table is read-only."""
    if source.is_source:
        raise QueryError(f"Cannot insert values into read-only {source.kind.label}: "
                         f"{source.name}", source.name)


def check_record(statement: InsertValues, source: DataSource) -> None:
    """The record the values make (``validateInsert``, then ``GenericRecordFactory.build``)."""
    headers = ([c.name for c in source.columns if c.role in _HEADER_ROLES]
               if not statement.columns else
               [n for n in statement.columns if (c := source.column(n)) is not None
                and c.role in _HEADER_ROLES])
    if headers:
        raise QueryError(f"Cannot insert into HEADER columns: {', '.join(headers)}", source.name)
    failed = f"Failed to insert values into '{statement.target}'. "
    names = statement.columns or tuple(c.name for c in source.columns
                                       if c.role not in _HEADER_ROLES)
    if len(names) != len(statement.values):
        raise QueryError(f"{failed}Expected a value for each column. Expected Columns: "
                         f"[{', '.join(f'`{n}`' for n in statement.columns)}]. Got "
                         f"[{', '.join(operators.ksql_text(v) for v in statement.values)}]",
                         source.name)
    for name in names:
        if source.column(name) is None and name not in PSEUDO_COLUMNS:
            raise QueryError(f"{failed}Column name `{name}` does not exist.", source.name)
        if name in NOT_INSERTABLE:
            raise QueryError(f"{failed}Inserting into column `{name}` is not allowed.",
                             source.name)
    for value in statement.values:
        if _references_a_column(value):
            raise QueryError(f"{failed}Unsupported column reference in insert value: "
                             f"{operators.ksql_text(value)}", source.name)
    if source.kind is SourceKind.TABLE:
        missing = [c.name for c in source.key_columns if c.name not in names]
        if missing:
            raise QueryError(f"{failed}Value for primary key column(s) {', '.join(missing)} is "
                             "required for tables", source.name)


def _references_a_column(value: exp.Expr) -> bool:
    """Whether a value reads a column: a bare word, unless it is NULL or a time unit passed to
    a function."""
    return any(not c.table and not (c.name.upper() == "NULL" or (
        c.name.upper() in TIME_UNITS and isinstance(c.parent, exp.Func)))
        for c in references.columns(value))
