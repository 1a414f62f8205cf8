"""Where ksqlDB's generated code throws on a record and the Spark translation gives NULL instead.

ksqlDB evaluates a query's expressions in Java: a CAST of text that is no number, an integer or
DECIMAL division by zero, a function refusing its arguments (PARSE_TIMESTAMP of text its pattern
does not match) throw, and ksqlDB logs a RECORD_PROCESSING_ERROR to the processing log and goes
on with NULL. The translation (:func:`metastore.functions.library.to_spark`) gives the same NULL
without a trace; asked to, it records a :class:`Failure` for each such node: the Spark condition
under which its NULL stands for ksqlDB's exception, the exception's message, and where the node
sits, so the planner can name the failure as ksqlDB's logger would
(:mod:`metastore.planner.record_checks`).

Which nodes can fail: a CAST of text to a number, a time or bytes, and of a number to a DECIMAL
too small for it; ``/`` and ``%`` of INTEGER, BIGINT or DECIMAL operands; a function declared
``raises`` (a NULL result from arguments none of which is NULL is its exception). A node inside
a CASE branch or behind AND / OR carries the condition under which Java would evaluate it.

In a lambda's body: a failure that a node inside the body catches is that element's NULL, and
not recorded (its condition names the lambda's variables, and ksqlDB logs it once per element);
one that nothing inside it catches aborts the whole call in ksqlDB (TRANSFORM's stream of
elements ends in the exception), so it is kept *within* its lambda (:attr:`Failure.within`)
until the call that takes the lambda lifts it (:func:`of_lambda_call`): the call fails where
some element fails.

Where the exception is caught: ksqlDB's ``ksql.nested.error.set.null`` wraps some nodes in a
``try`` that logs ``Error processing <what>`` and gives NULL (:func:`catcher`): every CAST (its
target type, its operand's evaluation included), a function call or a dereference passed to a
function call (the function, the field), and an ARRAY's element, a STRUCT's field and a MAP's key
or value (``array item``, ``struct field``, ``map key``, ``map value``). An exception no such
node catches fails the clause's whole expression.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from metastore.functions import sparksql as sql
from metastore.sql import types as ty

PROJECT, WHERE, GROUP = "expressions", "where", "group"
"""The clauses of a SELECT a failure can sit in (its ``arg_key`` under the SELECT)."""
HAVING = "having"
"""An aggregation's HAVING, which the planner moves into its rows' deletion (:data:`CLAUSE`)."""
GROUP_KEY = "ksql_group_key"
"""Where a planner's condition on a GROUP BY expression (that it is not NULL, which the planner
adds to the WHERE) keeps the expression's index, in the condition node's ``meta``: a failure in
it is the GROUP BY's."""
CLAUSE = "ksql_clause"
"""Where a planner moved a clause's expression into another (a table query's WHERE into its
rows' deletion), that clause's name, in the moved node's ``meta``: a failure in it is the
clause's."""
PREPARED = "ksql_prepared_column"
"""An aggregate call's argument, as a column of ksqlDB's ``Aggregate.Prepare`` step, in the
argument's ``meta``: its ``(name, index, text)``."""

_PARSED = frozenset({"INTEGER", "BIGINT", "DOUBLE", "DECIMAL", "DATE", "TIME", "TIMESTAMP",
                     "BYTES"})
_NUMBERS = frozenset({"INTEGER", "BIGINT", "DOUBLE", "DECIMAL"})
Caught = tuple[str, tuple[object, ...]]
"""What catches a node's exception: the ``<what>`` of ``Error processing <what>``, and where the
catching node sits (its path of argument keys and indexes from the clause's root)."""
TypeOf = Callable[[exp.Expr], ty.SqlType | None]
"""A typed expression's ksqlDB type (:func:`metastore.functions.library.ksql_type`)."""


@dataclass(frozen=True)
class Failure:
    """A node of a query's expression that stands for a Java exception where ``condition``
    holds (Spark SQL over the row, qualified as the query's SELECT is)."""

    name: str
    """What ksqlDB's ``Error processing <name>`` names (:func:`catcher`): a function, a field, a
    CAST's target type, ``array item``, ``struct field``, ``map key`` or ``map value``; else the
    failing node's own name."""
    condition: exp.Expr
    cause: exp.Expr
    """The exception's message, as Spark SQL of a STRING."""
    wrapped: bool
    """ksqlDB catches it in a node around it (:func:`catcher`) and logs ``Error processing
    <name>``; otherwise the clause's whole expression fails (``Error computing expression
    ...``)."""
    clause: str
    """:data:`PROJECT`, :data:`WHERE`, :data:`GROUP` or :data:`HAVING`; empty elsewhere (a
    join's condition): the planner does not check those."""
    index: int
    """Its expression's position in the clause's list (0 for WHERE)."""
    column: str
    """The name of the SELECT item it sits in (empty outside the SELECT list)."""
    prepared: tuple[str, int, str] | None = None
    """The column of ksqlDB's ``Aggregate.Prepare`` step it sits in (an aggregate call's
    argument): its name, index and text."""
    caught_at: tuple[object, ...] = ()
    """Where the node that catches it sits, when :attr:`wrapped`: failures one node catches are
    one entry (the first exception ends its evaluation)."""
    within: exp.Lambda | None = None
    """The lambda in whose body it sits, uncaught there: its :attr:`condition` and
    :attr:`cause` name the lambda's parameters, and it fails the call the lambda is passed to
    (:func:`of_lambda_call`), not a clause."""


def catcher(node: exp.Expr, type_of: TypeOf) -> Caught | None:
    """The nearest node around ``node`` (or ``node`` itself) whose exception ksqlDB catches
    where it is, and what its ``Error processing`` message names; None where none does (the
    clause's expression fails)."""
    child = node
    while child.parent is not None and not isinstance(child, exp.Select | exp.Lambda):
        parent = child.parent
        if isinstance(child, exp.Cast):
            target = type_of(child)
            return (target.sql(), _path(child)) if target is not None else None
        if _meta(child, PREPARED) is not None:
            return None  # ksqlDB's Aggregate.Prepare computes the argument as a column alone
        what = _catching(child, parent)
        if what is not None:
            return what, _path(child)
        child = parent
    return None


def _catching(child: exp.Expr, parent: exp.Expr) -> str | None:
    """What ksqlDB's ``try`` around ``child``, as ``parent``'s part, names; None: no ``try``."""
    inner = child
    while isinstance(inner, exp.Paren):
        inner = inner.this
    if isinstance(parent, exp.Array):
        return "array item"
    if isinstance(parent, exp.Struct) or (
            isinstance(parent, exp.PropertyEQ) and _calls(parent.parent, "STRUCT")):
        return "struct field"
    if isinstance(parent, exp.PropertyEQ) and _calls(parent.parent, "MAP"):
        return "map key" if child is parent.this else "map value"
    if isinstance(parent, exp.Anonymous) and not _calls(parent, "MAP", "STRUCT"):
        if isinstance(inner, exp.Anonymous):
            return str(inner.name).upper()
        if isinstance(inner, exp.Dot | exp.JSONExtract):
            path = inner.expression
            text = path.name if isinstance(path, exp.Expr) else str(path)
            return text.strip("$.").split(".")[-1]
    return None


def _calls(node: exp.Expr | None, *names: str) -> bool:
    """Whether ``node`` is a call of one of the functions ``names``."""
    return isinstance(node, exp.Anonymous) and str(node.name).upper() in names


def _path(node: exp.Expr) -> tuple[object, ...]:
    """Where ``node`` sits under its clause's SELECT, or in an aggregate call's argument (one
    column of ksqlDB's Aggregate.Prepare, however many calls take it): its argument keys and
    indexes."""
    steps: list[object] = []
    while node.parent is not None and not isinstance(node, exp.Select) and \
            _meta(node, PREPARED) is None:
        steps += [node.arg_key, node.index]
        node = node.parent
    return tuple(reversed(steps))


def of_cast(node: exp.Cast, source: ty.SqlType | None, target: ty.SqlType,
            operand: exp.Expr, result: exp.Expr) -> Failure | None:
    """The failure of ``CAST(operand AS target)`` (translated to ``result``), if it can fail:
    the CAST catches it itself."""
    text_parsed = source == ty.STRING and target.base in _PARSED
    overflow = (isinstance(target, ty.DecimalType) and source is not None
                and source.base in _NUMBERS and source != target
                and not _holds(target, source))
    if not (text_parsed or overflow):
        return None
    value = sql.fn("trim", operand.copy()) if text_parsed else sql.cast(operand.copy(), ty.STRING)
    return _failure(node, _null_from(result, operand), _cast_cause(value, target, text_parsed),
                    (target.sql(), _path(node)))


def of_arithmetic(node: exp.Binary, symbol: str, result_type: ty.SqlType | None,
                  left: exp.Expr, right: exp.Expr, result: exp.Expr, type_of: TypeOf
                  ) -> Failure | None:
    """The failure of ``left <symbol> right`` (translated to ``result``): an integer or DECIMAL
    division or remainder by zero (or a DECIMAL quotient its type cannot hold exactly);
    ``type_of``: the ksqlDB type of a node around it (a CAST that catches it)."""
    if symbol not in ("/", "%") or result_type is None or \
            result_type.base not in ("INTEGER", "BIGINT", "DECIMAL"):
        return None
    divisor = node.right.this if isinstance(node.right, exp.Paren) else node.right
    if result_type.base != "DECIMAL" and isinstance(divisor, exp.Literal) and \
            not divisor.is_string and divisor.this not in ("0", "0.0"):
        return None  # an integer division by a number that is not 0 never throws
    if result_type.base == "DECIMAL":
        by_zero = sql.if_(sql.eq(left.copy(), sql.lit(0)), sql.lit("Division undefined"),
                          sql.lit("Division by zero")) if symbol == "/" \
            else sql.lit("Division by zero")
        cause = sql.if_(sql.eq(right.copy(), sql.lit(0)), by_zero, sql.lit("Rounding necessary"))
    else:
        cause = sql.lit("/ by zero")
    return _failure(node, _null_from(result, left, right), cause, catcher(node, type_of))


def of_call(node: exp.Anonymous, name: str, args: tuple[exp.Expr, ...],
            result: exp.Expr, type_of: TypeOf) -> Failure | None:
    """The failure of a call of a function declared ``raises``: NULL from non-NULL arguments;
    ``type_of`` as :func:`of_arithmetic`'s."""
    if args and all(isinstance(argument, exp.Literal) for argument in args):
        return None  # the same for every row: constant, and checked by ksqlDB's own tests
    cause = sql.lit(f"Failed to invoke function {name}")
    return _failure(node, _null_from(result, *args), cause, catcher(node, type_of), name)


def of_lambda_call(node: exp.Anonymous, name: str, condition: exp.Expr, cause: exp.Expr,
                   type_of: TypeOf) -> Failure | None:
    """The failure of a call of ``name`` whose lambda fails on some element where
    ``condition`` holds (over the row), with ``cause``; ``type_of`` as :func:`of_arithmetic`'s."""
    return _failure(node, condition, cause, catcher(node, type_of), name)


def _holds(target: ty.DecimalType, source: ty.SqlType) -> bool:
    """Whether every value of ``source`` fits ``target``'s integer digits (a widening CAST)."""
    digits = {"INTEGER": 10, "BIGINT": 19}.get(source.base)
    if isinstance(source, ty.DecimalType):  # rounding to a smaller scale may carry a digit
        digits = source.precision - source.scale + (source.scale > target.scale)
    return digits is not None and target.precision - target.scale >= digits


def _null_from(result: exp.Expr, *arguments: exp.Expr) -> exp.Expr:
    """Whether ``result`` is NULL though none of ``arguments`` is."""
    condition: exp.Expr = sql.is_null(result.copy())
    for argument in arguments:
        condition = exp.and_(condition, exp.Not(this=sql.is_null(argument.copy())), copy=False)
    return condition


def _cast_cause(value: exp.Expr, target: ty.SqlType, text_parsed: bool) -> exp.Expr:
    """The message of the Java exception ksqlDB's CAST of ``value`` to ``target`` throws."""
    if not text_parsed:
        assert isinstance(target, ty.DecimalType)
        return sql.fn("concat", sql.lit(
            f"Numeric field overflow: A field with precision {target.precision} and scale "
            f"{target.scale} must round to an absolute value less than "
            f"10^{target.precision - target.scale}. Got "), value)
    if target.base in ("INTEGER", "BIGINT", "DOUBLE"):
        return sql.fn("concat", sql.lit('For input string: "'), value, sql.lit('"'))
    if target.base in ("DATE", "TIME", "TIMESTAMP"):
        return sql.fn("concat", sql.lit(f"Failed to parse {target.base.lower()} '"), value,
                      sql.lit("'"))
    if target.base == "BYTES":
        return sql.fn("concat", sql.lit("Illegal base64 text: '"), value, sql.lit("'"))
    return sql.fn("concat", sql.lit("Character array is not a valid "), sql.lit(target.sql()),
                  sql.lit(": '"), value, sql.lit("'"))


def _failure(node: exp.Expr, condition: exp.Expr, cause: exp.Expr, caught: Caught | None,
             name: str = "") -> Failure | None:
    """``node``'s failure where it sits: its clause, and the condition under which Java
    evaluates it at all (its CASE branch taken, AND / OR not decided before); ``caught``: what
    catches it, if something does; ``name``: its own name otherwise. In a lambda's body: None
    where the body catches it, else the failure :attr:`~Failure.within` that lambda."""
    wrapped, caught_at = caught is not None, caught[1] if caught is not None else ()
    name = caught[0] if caught is not None else name
    clause, index, column = "", 0, ""
    child: exp.Expr = node
    parent = node.parent
    while parent is not None:
        if isinstance(parent, exp.Lambda):
            return None if wrapped else Failure(name, condition, cause, False, "", 0, "",
                                                within=parent)
        prepared = _meta(child, PREPARED)
        if prepared is not None:  # ksqlDB computes it for every row, whatever is around the call
            return Failure(name, condition, cause, wrapped, PROJECT, 0, "", prepared, caught_at)
        guard = _guard(parent, child)
        if guard is not None:
            condition = exp.and_(guard, condition, copy=False)
        grouped, moved = _meta(parent, GROUP_KEY), _meta(parent, CLAUSE)
        if isinstance(grouped, int):
            return Failure(name, condition, cause, wrapped, GROUP, grouped, "",
                           caught_at=caught_at)
        if isinstance(moved, str):
            return Failure(name, condition, cause, wrapped, moved, 0, "", caught_at=caught_at)
        if isinstance(parent, exp.Group):
            return None  # the planner's copy of the expression in the WHERE is checked
        if isinstance(parent, exp.Select):
            clause = child.arg_key if child.arg_key in (PROJECT, WHERE) else ""
            index = child.index or 0
            column = child.alias if isinstance(child, exp.Alias) else ""
            break
        child, parent = parent, parent.parent
    return Failure(name, condition, cause, wrapped, clause, index, column, caught_at=caught_at)


def moved_clause(tree: exp.Expr, clause: str) -> exp.Expr | None:
    """The node of ``tree`` a planner moved ``clause``'s expression into (marked by
    :data:`CLAUSE`), if any."""
    return next((node for node in tree.walk() if _meta(node, CLAUSE) == clause), None)


def _meta(node: exp.Expr, key: str) -> Any:
    return node.meta.get(key) if node._meta is not None else None


def _guard(parent: exp.Expr, child: exp.Expr) -> exp.Expr | None:
    """The condition under which ``parent`` evaluates ``child``, when it may not: the operands
    before it are translated already (the translation runs left to right)."""
    if isinstance(parent, exp.And) and child is parent.right:
        return sql.fn("coalesce", parent.left.copy(), exp.true())
    if isinstance(parent, exp.Or) and child is parent.right:
        return exp.Not(this=sql.fn("coalesce", parent.left.copy(), exp.false()))
    case = parent.parent if isinstance(parent, exp.If) else None
    operand = case.args.get("this") if isinstance(case, exp.Case) else None
    if isinstance(parent, exp.If) and child is parent.args.get("true"):
        return _taken(parent, operand)
    if isinstance(parent, exp.If) and child is parent.args.get("false"):
        return exp.Not(this=_taken(parent, operand))
    if isinstance(parent, exp.Case) and child is not parent.args.get("this"):
        branches = parent.args.get("ifs") or []  # a branch after those not taken
        position = next((i for i, branch in enumerate(branches) if branch is child), None)
        earlier = branches[:position] if position is not None else \
            branches if child is parent.args.get("default") else []
        operand = parent.args.get("this")
        untaken = [exp.Not(this=_taken(branch, operand)) for branch in earlier]
        return exp.and_(*untaken, copy=False) if untaken else None
    return None


def _taken(branch: exp.Expr, operand: exp.Expr | None) -> exp.Expr:
    """Whether a CASE's branch (or an IF) is taken: its condition true, or, in a simple CASE
    (``CASE x WHEN 1 THEN ...``), its value equal to the operand."""
    when = branch.this.copy()
    if operand is not None:
        when = sql.eq(operand.copy(), when)
    return sql.fn("coalesce", when, exp.false())


__all__ = ["CLAUSE", "GROUP", "HAVING", "PREPARED", "PROJECT", "WHERE", "Failure", "catcher",
           "moved_clause", "of_arithmetic", "of_call", "of_cast",
           "of_lambda_call"]
