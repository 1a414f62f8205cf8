"""ksqlDB's rules for the WHERE clause of a pull query on a table (its ``QueryFilterNode``).

ksqlDB rewrites the clause without BETWEEN and IN (``PullQueryRewriter``), pushes NOT down to the
comparisons and expands it into a disjunction of conjunctions (``LogicRewriter``). Each
conjunction must compare every key column with ``=`` to an expression without columns, and only
comparisons and LIKE are allowed; where a conjunction does not, the table is scanned, which
needs ``ksql.query.pull.table.scan.enabled``. A literal a key is compared with must convert to
the key's type (``DefaultSqlValueCoercer.STRICT``), and a windowed table's bounds on WINDOWSTART
and WINDOWEND must not repeat. The lookups decide how the table is read: by key, by a range of
one STRING or BYTES key (``ksql.query.pull.range.scan.enabled``, not on windowed tables), or by
a scan (``PullPhysicalPlanBuilder``).
"""

from __future__ import annotations

import base64
import binascii
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from sqlglot import exp

from metastore.catalog.exceptions import QueryError, TooLargeError
from metastore.catalog.model import Column, DataSource
from metastore.engine.pseudo_columns import PSEUDO_COLUMNS, WINDOW_BOUNDS
from metastore.functions.operators import COMPARISONS, Comparison, ksql_text
from metastore.sql import types as ty

SYNTAX_HELP = (" See https://cnfl.io/queries for more info.\n"
               "Add EMIT CHANGES if you intended to issue a push query.")
"""ksqlDB's ``PullQueryValidator.PULL_QUERY_SYNTAX_HELP``, appended to its pull-query errors."""

MAX_DISJUNCTS = 1_000
"""How many conjunctions a WHERE clause may expand to (ksqlDB sets no bound; AND-ed ORs and IN
lists multiply: 16 AND-ed pairs are 65,536). Counted before expanding, so a refused clause costs
no expansion work."""

_WINDOW_OPERATORS = ("EQUAL", "GREATER_THAN", "GREATER_THAN_OR_EQUAL", "LESS_THAN",
                     "LESS_THAN_OR_EQUAL")
_RANGE_OPERATORS = frozenset(_WINDOW_OPERATORS[1:])
_KEY_BOUND_REFUSED = frozenset({"NOT_EQUAL", "IS_DISTINCT_FROM", "IS_NOT_DISTINCT_FROM"})
_INT_MIN, _INT_MAX = -(2 ** 31), 2 ** 31 - 1
_JAVA_TREE = "io.confluent.ksql.execution.expression.tree."


def column_references(tree: exp.Expr, bound: frozenset[str] = frozenset()) -> Iterator[exp.Column]:
    """The column references in ``tree``, in the order written (not a lambda's variables)."""
    if isinstance(tree, exp.Column):
        if tree.table or tree.name not in bound:
            yield tree
        return
    if isinstance(tree, exp.Lambda):
        bound = bound | {str(v.name) for v in tree.expressions}
    if isinstance(tree, exp.Dot | exp.JSONExtract):  # a struct field is no column
        yield from column_references(tree.this, bound)
        return
    for child in tree.iter_expressions():
        yield from column_references(child, bound)


# -- the WHERE clause, rewritten (PullQueryRewriter, LogicRewriter) ------------------------------

@dataclass(frozen=True)
class _Compare:
    """A comparison: ``left <operator> right``."""

    operator: Comparison
    left: exp.Expr
    right: exp.Expr


@dataclass(frozen=True)
class _Logic:
    """AND or OR of its parts (two as written; an IN list's equalities ORed, in order)."""

    operator: str
    parts: tuple[_Term, ...]


@dataclass(frozen=True)
class _Not:
    value: _Term


_Term = _Compare | _Logic | _Not | exp.Expr


def _term(node: exp.Expr) -> _Term:
    """``node`` without BETWEEN and IN (``PullQueryRewriter``)."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And | exp.Or):
        return _Logic("AND" if isinstance(node, exp.And) else "OR",
                      (_term(node.left), _term(node.right)))
    if isinstance(node, exp.Not) and not isinstance(_unparen(node.this), exp.Is):
        return _Not(_term(node.this))  # IS NOT NULL is one predicate
    if isinstance(node, exp.Between):
        value = node.this
        return _Logic("AND", (_Compare(COMPARISONS[exp.GTE], value, node.args["low"]),
                              _Compare(COMPARISONS[exp.LTE], value, node.args["high"])))
    if isinstance(node, exp.In) and node.expressions:
        equalities = tuple(_Compare(COMPARISONS[exp.EQ], node.this, item)
                           for item in node.expressions)
        return equalities[0] if len(equalities) == 1 else _Logic("OR", equalities)
    comparison = COMPARISONS.get(type(node))
    if comparison is not None and isinstance(node, exp.Binary):
        return _Compare(comparison, node.left, node.right)
    return node


def _push_not(term: _Term, negated: bool = False) -> _Term:
    """``LogicRewriter``'s NotPropagator: De Morgan down to comparisons and columns, which keep a
    NOT; a NOT over any other expression is dropped, as ksqlDB drops it."""
    if isinstance(term, _Logic):
        operator = {"AND": "OR", "OR": "AND"}[term.operator] if negated else term.operator
        return _Logic(operator, tuple(_push_not(part, negated) for part in term.parts))
    if isinstance(term, _Not):
        return _push_not(term.value, not negated)
    if isinstance(term, _Compare | exp.Column | exp.Boolean):
        return _Not(term) if negated else term
    return term


def _count(term: _Term) -> int:
    if isinstance(term, _Logic):
        counts = [_count(part) for part in term.parts]
        return sum(counts) if term.operator == "OR" else math.prod(counts)
    return 1


def _disjuncts(term: _Term) -> list[_Term]:
    """The conjunctions of ``term`` in disjunctive normal form, in ksqlDB's order
    (``LogicRewriter.rewriteDNF`` then ``extractDisjuncts``)."""
    if not isinstance(term, _Logic):
        return [term]
    if term.operator == "OR":
        return [d for part in term.parts for d in _disjuncts(part)]
    return [_Logic("AND", choice) if len(choice) > 1 else choice[0]
            for choice in itertools.product(*(_disjuncts(part) for part in term.parts))]


def _text(term: _Term) -> str:
    """``term`` as ksqlDB's ExpressionFormatter prints it, its columns unqualified."""
    if isinstance(term, _Compare):
        return f"({_expr_text(term.left)} {term.operator.symbol} {_expr_text(term.right)})"
    if isinstance(term, _Logic):
        text = _text(term.parts[-1])
        for part in reversed(term.parts[:-1]):
            text = f"({_text(part)} {term.operator} {text})"
        return text
    if isinstance(term, _Not):
        return f"(NOT {_text(term.value)})"
    return _expr_text(term)


def _expr_text(node: exp.Expr) -> str:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Like):
        return f"({_expr_text(node.this)} LIKE {_expr_text(node.expression)})"
    if isinstance(node, exp.Is):
        return f"({_expr_text(node.this)} IS NULL)"
    if isinstance(node, exp.Not):
        inner = _unparen(node.this)
        if isinstance(inner, exp.Is):
            return f"({_expr_text(inner.this)} IS NOT NULL)"
        return f"(NOT {_expr_text(inner)})"
    return ksql_text(node, lambda column: str(column.name))


# -- QueryFilterNode -----------------------------------------------------------------------------

@dataclass
class _Disjunct:
    """What ``QueryFilterNode.Validator`` learns of one conjunction."""

    keyed: bool = False
    seen: set[int] = field(default_factory=set)
    scan: bool = False


class KeyFilter:
    """One table's pull query WHERE rules (``QueryFilterNode``)."""

    def __init__(self, source: DataSource, table_scans: bool, range_scans: bool) -> None:
        self.source = source
        self.table_scans = table_scans
        self.range_scans = range_scans
        self.keys = source.key_columns
        self.windowed = source.window is not None

    def needs_scan(self, where: exp.Expr) -> bool:
        """Whether the WHERE clause ``where`` needs a table scan; raises when it is refused."""
        term = _push_not(_term(where))
        if _count(term) > MAX_DISJUNCTS:
            raise TooLargeError(f"The WHERE clause expands to more than {MAX_DISJUNCTS} "
                                "alternatives.")
        disjuncts = _disjuncts(term)
        if self._validate(disjuncts):
            return True
        kinds = [self._lookup(disjunct) for disjunct in disjuncts]
        if "NONKEY" in kinds:
            return True
        if all(kind == "EQUAL" for kind in kinds):
            return False
        if len(kinds) == 1:  # a range scan
            return not self.range_scans or self.windowed
        return True

    # -- validation --------------------------------------------------------------------------
    def _validate(self, disjuncts: list[_Term]) -> bool:
        """``validateWhereClauseAndCheckTableScan``: True when a table scan is needed."""
        for disjunct in disjuncts:
            found = _Disjunct()
            self._process(disjunct, found)
            if found.scan:
                return True
            if not found.keyed:
                if self.table_scans:
                    return True
                raise self.where_error(f"WHERE clause missing key column for disjunct: "
                                       f"{_text(disjunct)}")
            if found.seen and len(found.seen) != len(self.keys):
                if self.table_scans:
                    return True
                specified = ", ".join(f"`{self.keys[i].name}`" for i in sorted(found.seen))
                raise self.where_error(f"Multi-column sources must specify every key in the "
                                       f"WHERE clause. Specified: [{specified}] Expected: "
                                       f"{self._key_list()}")
        return False

    def _process(self, term: _Term, found: _Disjunct) -> None:
        if isinstance(term, _Logic):
            if term.operator != "AND":
                self._scan_or_raise(found, f"Only AND expressions are supported: {_text(term)}",
                                    windowed=False)
            for part in term.parts:
                self._process(part, found)
        elif isinstance(term, _Compare):
            self._comparison(term, found)
        elif isinstance(term, exp.Like):
            self._like(term, found)
        else:
            raise self.where_error(f"Unsupported expression in WHERE clause: {_text(term)}",
                                   windowed=False)

    def _comparison(self, term: _Compare, found: _Disjunct) -> None:
        column, other = _column_side(term)
        if column is None:
            self._scan_or_raise(found, "A comparison must directly reference a key column")
            return
        if any(True for _ in column_references(other)):
            self._scan_or_raise(found, "A comparison must be between a key column and a "
                                       "resolvable expression")
            return
        name = str(column.name)
        if name in WINDOW_BOUNDS:
            if term.operator.name not in _WINDOW_OPERATORS:
                raise self.where_error(f"Unsupported `{name}` bounds: {term.operator.name}",
                                       windowed=True)
            if not self.windowed:
                raise self.where_error("Cannot use WINDOWSTART/WINDOWEND on non-windowed "
                                       "source", windowed=False)
            return
        index = self._key_index(name)
        if index is None:
            return
        if term.operator.name in _KEY_BOUND_REFUSED:
            self._scan_or_raise(found, f"Bound on key columns '{self._key_list()}' must "
                                       "currently be '='")
        if index in found.seen and not self.table_scans:
            raise self.where_error("A comparison condition on the key column cannot be "
                                   "combined with other comparisons such as an IN predicate")
        found.seen.add(index)
        found.keyed = True

    def _like(self, node: exp.Like, found: _Disjunct) -> None:
        value, pattern = _unparen(node.this), _unparen(node.expression)
        if not isinstance(value, exp.Column):
            self._scan_or_raise(found, "Like condition must be between strings")
            return
        sql_type = self._column_type(str(value.name))
        if sql_type is None:
            raise self.where_error(f"Like condition on non-existent column `{value.name}`")
        if sql_type.base != "STRING":
            raise self.where_error(f"The column type for Like condition must be VARCHAR. The "
                                   f"column type is {sql_type.base}")
        if not (isinstance(pattern, exp.Null)
                or (isinstance(pattern, exp.Literal) and pattern.is_string)):
            raise self.where_error(f"Like condition on non-string pattern {_java_class(pattern)}")

    def _scan_or_raise(self, found: _Disjunct, message: str,
                       windowed: bool | None = None) -> None:
        if not self.table_scans:
            raise self.where_error(message, windowed)
        found.scan = True

    # -- lookup constraints ------------------------------------------------------------------
    def _lookup(self, disjunct: _Term) -> str:
        """``KeyValueExtractor.getLookupConstraint``: EQUAL (a key lookup), RANGE or NONKEY;
        raises for a key value that is NULL or does not convert to the key's type."""
        operators: dict[int, str] = {}
        comparisons = list(_comparisons(disjunct))
        for term in comparisons:
            column, other = _column_side(term)
            index = self._key_index(str(column.name)) if column is not None else None
            if index is None:
                continue
            self._check_key_value(other, self.keys[index], term)
            if operators.get(index) == "EQUAL":
                continue
            if term.operator.name == "EQUAL" or index not in operators:
                operators[index] = term.operator.name
        if self.windowed:
            _WindowBounds().extract(comparisons, self)
        if not operators:
            return "NONKEY"
        if len(operators) > 1:
            return "EQUAL" if all(op == "EQUAL" for op in operators.values()) else "NONKEY"
        operator = operators.get(0)
        if operator == "EQUAL":
            return "EQUAL"
        if self.keys[0].type.base in ("STRING", "BYTES") and operator in _RANGE_OPERATORS:
            return "RANGE"
        return "NONKEY"

    def _check_key_value(self, value: exp.Expr, key: Column, term: _Compare) -> None:
        literal = _literal(value)
        if literal is None:
            return  # resolved by evaluating it
        kind, shown = literal
        if kind == "NULL":
            raise QueryError(f"Primary key columns can not be NULL: {_text(term)}")
        if not _converts(kind, shown, key.type):
            raise QueryError(f"'{shown}' can not be converted to the type of the key column: "
                             f"{key.name} {_plain_type(key.type)} KEY")

    # -- helpers -----------------------------------------------------------------------------
    def _key_index(self, name: str) -> int | None:
        return next((i for i, key in enumerate(self.keys) if key.name == name), None)

    def _column_type(self, name: str) -> ty.SqlType | None:
        column = self.source.column(name)
        if column is not None:
            return column.type
        if name in WINDOW_BOUNDS and self.windowed:
            return WINDOW_BOUNDS[name]
        return PSEUDO_COLUMNS.get(name)

    def _key_list(self) -> str:
        return "[" + ", ".join(f"{ty.field_text(k.name, k.type)} KEY" for k in self.keys) + "]"

    def where_error(self, message: str, windowed: bool | None = None) -> QueryError:
        """``QueryFilterNode.invalidWhereClauseException``."""
        windowed = self.windowed if windowed is None else windowed
        window_help = ("\n - (optionally) limits the time bounds of the windowed table."
                       "\n\t Bounds on [`WINDOWSTART`, `WINDOWEND`] are supported"
                       f"\n\t Supported operators are [{', '.join(_WINDOW_OPERATORS)}]"
                       if windowed else "")
        return QueryError(
            f"{message}. {SYNTAX_HELP}"
            "\nPull queries require a WHERE clause that:"
            "\n - includes a key equality expression, e.g. `SELECT * FROM X WHERE <key-column> "
            "= Y;`."
            "\n - in the case of a multi-column key, is a conjunction of equality expressions "
            "that cover all key columns."
            "\n - to support range expressions, e.g.,  SELECT * FROM X WHERE <key-column> < Y;`, "
            "range scans need to be enabled by setting ksql.query.pull.range.scan.enabled=true"
            f"{window_help}"
            "\nIf more flexible queries are needed, , table scans can be enabled by setting "
            "ksql.query.pull.table.scan.enabled=true.")


class _WindowBounds:
    """``QueryFilterNode.WindowBoundsExtractor``: per window bound at most one lower, one upper
    and one equality bound, and an equality bound alone."""

    def __init__(self) -> None:
        self.bounds: dict[tuple[str, str], bool] = {}

    def extract(self, comparisons: list[_Compare], table: KeyFilter) -> None:
        for term in comparisons:
            column, _ = _column_side(term)
            if column is None or str(column.name) not in WINDOW_BOUNDS:
                continue
            name = str(column.name)
            kind = _simplified(term)
            fresh = (name, kind) not in self.bounds
            if fresh:
                self.bounds[(name, kind)] = True
            if (name, "EQUAL") in self.bounds and ((name, "LESS_THAN") in self.bounds
                                                   or (name, "GREATER_THAN") in self.bounds):
                raise table.where_error(f"`{_text(term)}` cannot be combined with other "
                                        f"`{name}` bounds", windowed=True)
            if not fresh:
                raise table.where_error(f"Duplicate `{name}` bounds on: {kind}", windowed=True)


def _simplified(term: _Compare) -> str:
    """The comparison's kind with its column on the left: EQUAL, LESS_THAN or GREATER_THAN."""
    name = term.operator.name
    inverted = isinstance(_unparen(term.right), exp.Column)
    if name in ("LESS_THAN", "LESS_THAN_OR_EQUAL"):
        return "GREATER_THAN" if inverted else "LESS_THAN"
    if name in ("GREATER_THAN", "GREATER_THAN_OR_EQUAL"):
        return "LESS_THAN" if inverted else "GREATER_THAN"
    return name


def _comparisons(term: _Term) -> Iterator[_Compare]:
    if isinstance(term, _Compare):
        yield term
    elif isinstance(term, _Logic):
        for part in term.parts:
            yield from _comparisons(part)


def _unparen(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _column_side(term: _Compare) -> tuple[exp.Column | None, exp.Expr]:
    """The column a comparison bounds (its right side first, as ksqlDB looks) and the other
    side."""
    left, right = _unparen(term.left), _unparen(term.right)
    if isinstance(right, exp.Column):
        return right, left
    if isinstance(left, exp.Column):
        return left, right
    return None, right


def _literal(node: exp.Expr) -> tuple[str, str] | None:
    """A literal's ksqlDB type and its value as Java prints it; None when not a literal."""
    node = _unparen(node)
    if isinstance(node, exp.Null):
        return "NULL", "null"
    if isinstance(node, exp.Boolean):
        return "BOOLEAN", "true" if node.this else "false"
    negative = isinstance(node, exp.Neg)
    number = node.this if negative else node
    if not isinstance(number, exp.Literal):
        return None
    text = str(number.this)
    if number.is_string:
        return (None if negative else ("STRING", text))
    sign = "-" if negative else ""
    if text.isdigit():
        value = int(sign + text)
        return ("INTEGER" if _INT_MIN <= value <= _INT_MAX else "BIGINT"), str(value)
    if "e" in text.lower():
        return "DOUBLE", _java_double(float(sign + text))
    return "DECIMAL", str(Decimal(sign + text))


def _converts(kind: str, shown: str, target: ty.SqlType) -> bool:
    """ksqlDB's ``DefaultSqlValueCoercer.STRICT``: whether a literal converts to ``target``."""
    base = target.base
    if kind in ("INTEGER", "BIGINT", "DECIMAL"):
        if base in ("DOUBLE", kind) or (kind == "INTEGER" and base == "BIGINT"):
            return True
        return isinstance(target, ty.DecimalType) and _fits(Decimal(shown), target)
    if kind == "STRING":
        if base == "BYTES":
            try:
                base64.b64decode(shown, validate=True)
            except (binascii.Error, ValueError):
                return False
            return True
        return base in ("STRING", "TIMESTAMP", "TIME", "DATE")
    return base == kind


def _fits(value: Decimal, target: ty.DecimalType) -> bool:
    """``DecimalUtil.ensureFit``: no more integer digits than the type has, no rounding."""
    _, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        return False
    if len(digits) + exponent > target.precision - target.scale:
        return value == 0
    try:
        return value.quantize(Decimal(1).scaleb(-target.scale)) == value
    except InvalidOperation:
        return False


def _java_double(value: float) -> str:
    """Java's ``Double.toString``: plain from 10^-3 to 10^7, else ``d.dddE[-]n``."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    fraction = "".join(str(d) for d in digits[1:]) or "0"
    return f"{'-' if sign else ''}{digits[0]}.{fraction}E{len(digits) - 1 + exponent}"


def _plain_type(sql_type: ty.SqlType) -> str:
    """A type as ksqlDB prints it without escaping names (``FormatOptions.noEscape``)."""
    if isinstance(sql_type, ty.ArrayType):
        return f"ARRAY<{_plain_type(sql_type.element)}>"
    if isinstance(sql_type, ty.MapType):
        return f"MAP<{_plain_type(sql_type.key)}, {_plain_type(sql_type.value)}>"
    if isinstance(sql_type, ty.StructType):
        return "STRUCT<" + ", ".join(f"{n} {_plain_type(t)}" for n, t in sql_type.fields) + ">"
    return sql_type.sql()


def _java_class(node: exp.Expr) -> str:
    """The name of the class of ksqlDB's expression tree that ``node`` parses to."""
    literal = _literal(node)
    if literal is not None:
        kinds = {"INTEGER": "IntegerLiteral", "BIGINT": "LongLiteral", "DOUBLE": "DoubleLiteral",
                 "DECIMAL": "DecimalLiteral", "BOOLEAN": "BooleanLiteral"}
        return _JAVA_TREE + kinds.get(literal[0], "Literal")
    if isinstance(node, exp.Column):
        return _JAVA_TREE + "UnqualifiedColumnReferenceExp"
    if isinstance(node, exp.Cast):
        return _JAVA_TREE + "Cast"
    if isinstance(node, exp.Func):
        return _JAVA_TREE + "FunctionCall"
    if isinstance(node, exp.Binary) and not isinstance(node, exp.Condition):
        return _JAVA_TREE + "ArithmeticBinaryExpression"
    return _JAVA_TREE + type(node).__name__
