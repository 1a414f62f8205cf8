"""ksqlDB's operators: which operand types each accepts, the type it gives, and its Spark SQL.

Comparisons (``= <> < <= > >=``, ``IS [NOT] DISTINCT FROM``, ``BETWEEN``), ``IN (...)`` and
arithmetic (``+ - * / %``), declared once for the typer (:func:`comparison_problem`,
:func:`arithmetic_type`, :func:`in_list_type`) and for the planner (:func:`translate`):

- a comparison is allowed by :data:`COMPARABLE` (ksqlDB's ``ComparisonUtil``): numbers with
  numbers, STRING with STRING and the time types, BOOLEAN, ARRAY, MAP and STRUCT only for
  (in)equality, BYTES with BYTES. Its value is FALSE, never NULL, when an operand is NULL;
  ``IS [NOT] DISTINCT FROM`` treats two NULLs as equal. ARRAY, MAP and STRUCT values are equal
  when their elements are (NULL elements equal), MAPs whatever their order;
- ``IN`` coerces its operands to a common type as ksqlDB's ``CoercionUtil`` does (literals
  leniently: ``'4.0'`` is a number, ``10`` a string, among strings), drops NULL literals, and
  matches as ``=`` does; NULL matches nothing;
- arithmetic widens INTEGER to BIGINT to DECIMAL to DOUBLE; DECIMAL results follow ksqlDB's
  precision and scale rules (``SqlDecimal``), a DECIMAL quotient that is not exact is NULL;
  integer division truncates; a DOUBLE divided by zero is an infinity or NaN; ``+`` of two
  STRINGs concatenates them as Java does (NULL reads ``null``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from sqlglot import exp

from metastore.functions import casts
from metastore.functions import sparksql as sql
from metastore.functions.registry import FunctionError, as_decimal
from metastore.sql import types as ty

COMPILE_PREFIXES = {"WHERE": "Invalid Predicate: ", "SELECT": "Invalid Select: "}
"""How ksqlDB prefixes an error it finds when it compiles an expression of a clause."""


class OperatorError(FunctionError):
    """An operator ksqlDB refuses for these operands. ``late`` errors are found by ksqlDB when it
    compiles the expression (``Invalid Predicate: ...``), the others when it types it."""

    def __init__(self, message: str, late: bool = False) -> None:
        super().__init__(message)
        self.late = late


@dataclass(frozen=True)
class Comparison:
    name: str
    """ksqlDB's name of the operator, as its messages quote it (``LESS_THAN``)."""
    symbol: str
    equality: bool
    null_safe: bool = False


COMPARISONS: dict[type[exp.Expr], Comparison] = {
    exp.EQ: Comparison("EQUAL", "=", True),
    exp.NEQ: Comparison("NOT_EQUAL", "<>", True),
    exp.LT: Comparison("LESS_THAN", "<", False),
    exp.LTE: Comparison("LESS_THAN_OR_EQUAL", "<=", False),
    exp.GT: Comparison("GREATER_THAN", ">", False),
    exp.GTE: Comparison("GREATER_THAN_OR_EQUAL", ">=", False),
    exp.NullSafeNEQ: Comparison("IS_DISTINCT_FROM", "IS DISTINCT FROM", True, null_safe=True),
    exp.NullSafeEQ: Comparison("IS_NOT_DISTINCT_FROM", "IS NOT DISTINCT FROM", True,
                               null_safe=True),
}

_NUMBERS = frozenset({"INTEGER", "BIGINT", "DECIMAL", "DOUBLE"})
_TIMES = frozenset({"TIME", "DATE", "TIMESTAMP"})
_COLLECTIONS = frozenset({"ARRAY", "MAP", "STRUCT"})

COMPARABLE: dict[str, tuple[frozenset[str], bool]] = {
    **{number: (_NUMBERS, False) for number in _NUMBERS},
    "STRING": (frozenset({"STRING"}) | _TIMES, False),
    "BOOLEAN": (frozenset({"BOOLEAN"}), True),
    "ARRAY": (frozenset({"ARRAY"}), True),
    "MAP": (frozenset({"MAP"}), True),
    "STRUCT": (frozenset({"STRUCT"}), True),
    "TIME": (frozenset({"TIME", "STRING"}), False),
    "DATE": (frozenset({"DATE", "TIMESTAMP", "STRING"}), False),
    "TIMESTAMP": (frozenset({"DATE", "TIMESTAMP", "STRING"}), False),
    "BYTES": (frozenset({"BYTES"}), False),
}
"""For a left operand's base type: the right operands' base types it compares with, and whether
only (in)equality is allowed."""


def comparison_problem(operator: Comparison, left: ty.SqlType | None, right: ty.SqlType | None,
                       left_text: str, right_text: str) -> str | None:
    """ksqlDB's message refusing ``left <operator> right`` (None: NULL), or None if allowed."""
    if left is None or right is None:
        return ("Comparison with NULL not supported: "
                f"{_base_name(left)} {operator.symbol} {_base_name(right)}\n"
                "Use 'IS NULL' or 'IS NOT NULL' instead.")
    partners, equality_only = COMPARABLE.get(left.base, (frozenset(), False))
    if right.base in partners and (operator.equality or not equality_only):
        return None
    return (f"Cannot compare {left_text} ({ty.backticked(left)}) to {right_text} "
            f"({ty.backticked(right)}) with {operator.name}.")


def _base_name(sql_type: ty.SqlType | None) -> str:
    return "NULL" if sql_type is None else sql_type.base


# -- arithmetic -----------------------------------------------------------------------------------

_ARITHMETIC: dict[type[exp.Expr], str] = {
    exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%",
}
_RANK = {"INTEGER": 1, "BIGINT": 2, "DECIMAL": 3, "DOUBLE": 4}
_MAX_PRECISION = 38


def _decimal_add(a: ty.DecimalType, b: ty.DecimalType) -> tuple[int, int]:
    scale = max(a.scale, b.scale)
    return scale + max(a.precision - a.scale, b.precision - b.scale) + 1, scale


def _decimal_multiply(a: ty.DecimalType, b: ty.DecimalType) -> tuple[int, int]:
    return a.precision + b.precision + 1, a.scale + b.scale


def _decimal_divide(a: ty.DecimalType, b: ty.DecimalType) -> tuple[int, int]:
    scale = max(6, a.scale + b.precision + 1)
    return a.precision - a.scale + b.scale + scale, scale


def _decimal_modulus(a: ty.DecimalType, b: ty.DecimalType) -> tuple[int, int]:
    scale = max(a.scale, b.scale)
    return min(a.precision - a.scale, b.precision - b.scale) + scale, scale


DECIMAL_RESULTS: dict[str, Callable[[ty.DecimalType, ty.DecimalType], tuple[int, int]]] = {
    "+": _decimal_add, "-": _decimal_add, "*": _decimal_multiply, "/": _decimal_divide,
    "%": _decimal_modulus,
}
"""(precision, scale) of a DECIMAL result, per operator (ksqlDB's ``SqlDecimal``)."""


def arithmetic_symbol(node: exp.Expr) -> str | None:
    return _ARITHMETIC.get(type(node))


def arithmetic_type(symbol: str, left: ty.SqlType | None, right: ty.SqlType | None,
                    text: str) -> ty.SqlType:
    """The type of ``left <symbol> right`` (None: NULL); ``text`` is the expression as written.
    ksqlDB's ExpressionTypeManager words every refusal as an error processing the expression."""
    if left is None or right is None:
        raise OperatorError(f"Error processing expression: {text}. Arithmetic on types "
                            f"{_java_type(left)} and {_java_type(right)} are not supported.")
    if symbol == "+" and left == ty.STRING and right == ty.STRING:
        return ty.STRING
    left_rank, right_rank = _RANK.get(left.base), _RANK.get(right.base)
    if left_rank is None or right_rank is None:
        raise OperatorError(f"Error processing expression: {text}. Unsupported arithmetic "
                            f"types. {left.base} {right.base}")
    wider = right if left_rank <= right_rank else left
    if not isinstance(wider, ty.DecimalType):
        return wider
    precision, scale = DECIMAL_RESULTS[symbol](as_decimal(left), as_decimal(right))
    return ty.DecimalType(min(precision, _MAX_PRECISION), min(scale, _MAX_PRECISION))


def _java_type(sql_type: ty.SqlType | None) -> str:
    return "null" if sql_type is None else ty.backticked(sql_type)


# -- IN: ksqlDB's coercion of a list to a common type ---------------------------------------------

TypeOf = Callable[[exp.Expr], ty.SqlType | None]


def in_list_type(value: exp.Expr, items: Sequence[exp.Expr], type_of: TypeOf) -> ty.SqlType | None:
    """The type ``value IN (items)`` compares in (None when every operand is a NULL literal);
    ksqlDB's errors for operands it cannot coerce."""
    return _Coercion(type_of).common([value, *(i for i in items if not isinstance(i, exp.Null))])


def list_type(items: Sequence[exp.Expr], type_of: TypeOf) -> ty.SqlType | None:
    """The common type of a list the user wrote (the elements of ``ARRAY[...]``, the keys or
    the values of ``MAP(...)``), as ksqlDB's ``CoercionUtil`` finds it: the first non-NULL
    element sets the kind, later ones widen it (a string literal reads as the number or
    BOOLEAN it spells, a literal becomes a STRING among STRINGs, STRUCTs take the union of
    their fields); None when every element is a NULL literal. Raises ksqlDB's errors
    (``late``) for an element that does not coerce."""
    return _Coercion(type_of).common(items)


def map_entries(args: Sequence[exp.Expr]) -> tuple[list[exp.Expr], list[exp.Expr]]:
    """The keys and the values of ``MAP(k := v, ...)`` as written."""
    return _map_entries(list(args))


_INT_RANGE = (-(2**31), 2**31 - 1)
_BIGINT_RANGE = (-(2**63), 2**63 - 1)


class _Coercion:
    def __init__(self, type_of: TypeOf) -> None:
        self.type_of = type_of

    def common(self, expressions: Sequence[exp.Expr],
               start: ty.SqlType | None = None) -> ty.SqlType | None:
        result = start
        for expression in expressions:
            result = self._with(expression, result)
        return result

    def _with(self, expression: exp.Expr, target: ty.SqlType | None) -> ty.SqlType | None:
        source = None if isinstance(expression, exp.Null) else self.type_of(expression)
        if target is None or source is None:
            return target or source
        constructor = _constructor(expression)
        if constructor is not None:
            return self._constructed(expression, constructor, source, target)
        text = _string_literal(expression)
        if text is not None and target.base in _NUMBERS:
            return _numeric_from_text(text, target)
        if text is not None and target == ty.BOOLEAN:
            if _boolean_from_text(text) is None:
                raise _invalid_syntax(text, target)
            return target
        lenient = _is_literal(expression)
        found = coerce(source, target, lenient) or coerce(target, source, lenient)
        if found is None:
            raise _no_operator(target, source, expression)
        return found

    def _constructed(self, expression: exp.Expr, constructor: str, source: ty.SqlType,
                     target: ty.SqlType) -> ty.SqlType:
        if target.base != constructor:
            raise _no_operator(target, source, expression)
        args = [a for a in expression.expressions]
        try:
            if isinstance(target, ty.ArrayType):
                return ty.ArrayType(self.common(args, target.element) or target.element)
            if isinstance(target, ty.MapType):
                keys, values = _map_entries(args)
                return ty.MapType(self.common(keys, target.key) or target.key,
                                  self.common(values, target.value) or target.value)
            assert isinstance(target, ty.StructType) and isinstance(source, ty.StructType)
            given = dict(zip((name for name, _ in source.fields), _struct_values(args),
                             strict=True))
            names = list(dict.fromkeys([*given, *(name for name, _ in target.fields)]))
            fields: list[tuple[str, ty.SqlType]] = []
            for name in names:
                wanted = target.field(name)
                found = source.field(name)
                if name in given and wanted is not None:
                    fields.append((name, self.common([given[name]], wanted) or wanted))
                else:
                    picked = wanted or found
                    assert picked is not None
                    fields.append((name, picked))
            return ty.StructType(tuple(fields))
        except OperatorError as error:
            if error.late and "operator does not exist" in str(error):
                raise _no_operator(target, source, expression) from error
            raise


def coerce(source: ty.SqlType, target: ty.SqlType, lenient: bool) -> ty.SqlType | None:
    """The type a ``source`` value coerces to when ``target`` is wanted (ksqlDB's
    ``DefaultSqlValueCoercer``: ``lenient`` for literals), None if it does not."""
    if source.base == target.base and source.base not in _COLLECTIONS | {"DECIMAL"}:
        return target
    if source.base in _NUMBERS and target.base in _NUMBERS:
        if _RANK[source.base] > _RANK[target.base]:
            return None
        return _widen_decimal(source, target) if target.base == "DECIMAL" else target
    if source == ty.STRING and target.base in _TIMES | {"BYTES"}:
        return target
    if source.base in _COLLECTIONS and source.base == target.base:
        return _coerce_collection(source, target, lenient)
    if lenient and target == ty.STRING and source.base in _NUMBERS | _TIMES | {"BOOLEAN"}:
        return target
    if lenient and source == ty.STRING and target.base in _NUMBERS | {"BOOLEAN"}:
        return target
    return None


def _coerce_collection(source: ty.SqlType, target: ty.SqlType,
                       lenient: bool) -> ty.SqlType | None:
    """An ARRAY, MAP or STRUCT coerced element by element."""
    if isinstance(source, ty.ArrayType) and isinstance(target, ty.ArrayType):
        element = coerce(source.element, target.element, lenient)
        return None if element is None else ty.ArrayType(element)
    if isinstance(source, ty.MapType) and isinstance(target, ty.MapType):
        key = coerce(source.key, target.key, lenient)
        value = coerce(source.value, target.value, lenient)
        return None if key is None or value is None else ty.MapType(key, value)
    if isinstance(source, ty.StructType) and isinstance(target, ty.StructType):
        return _coerce_struct(source, target, lenient)
    return None


def _coerce_struct(source: ty.StructType, target: ty.StructType,
                   lenient: bool) -> ty.SqlType | None:
    fields: list[tuple[str, ty.SqlType]] = []
    for name in dict.fromkeys([n for n, _ in source.fields] + [n for n, _ in target.fields]):
        wanted, given = target.field(name), source.field(name)
        if wanted is None or given is None:
            picked = wanted or given
            assert picked is not None
            fields.append((name, picked))
            continue
        common = coerce(given, wanted, lenient)
        if common is None:
            return None
        fields.append((name, common))
    return ty.StructType(tuple(fields))


def _widen_decimal(left: ty.SqlType, right: ty.SqlType) -> ty.DecimalType:
    a, b = as_decimal(left), as_decimal(right)
    scale = max(a.scale, b.scale)
    return ty.DecimalType(max(a.precision - a.scale, b.precision - b.scale) + scale, scale)


def decimal_of_value(value: Decimal) -> ty.DecimalType:
    """The DECIMAL ksqlDB gives a literal value (``0.8`` is DECIMAL(2, 1))."""
    _, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    scale = max(-exponent, 0)
    if -1 < value < 1:
        return ty.DecimalType(scale + 1, scale)
    return ty.DecimalType(max(len(digits) + max(exponent, 0), scale), scale)


def _numeric_from_text(text: str, target: ty.SqlType) -> ty.SqlType:
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        raise _invalid_syntax(text, target) from None
    if not value.is_finite():
        raise _invalid_syntax(text, target)
    source: ty.SqlType
    exponent = value.as_tuple().exponent
    if not any(c in text for c in ".eE") and isinstance(exponent, int) and exponent == 0:
        whole = int(value)
        if _INT_RANGE[0] < whole < _INT_RANGE[1]:
            source = ty.INTEGER
        elif _BIGINT_RANGE[0] < whole < _BIGINT_RANGE[1]:
            source = ty.BIGINT
        else:
            source = decimal_of_value(value)
    else:
        source = decimal_of_value(value)
    if ty.DOUBLE in (source, target):
        return ty.DOUBLE
    if "DECIMAL" in (source.base, target.base):
        return _widen_decimal(source, target)
    return target if _RANK[source.base] <= _RANK[target.base] else source


def _boolean_from_text(text: str) -> bool | None:
    word = text.strip().lower()
    if not word:
        return None
    for value, spellings in ((True, ("true", "yes")), (False, ("false", "no"))):
        if any(s.startswith(word) for s in spellings):
            return value
    return None


def _invalid_syntax(text: str, target: ty.SqlType) -> OperatorError:
    return OperatorError(f'invalid input syntax for type {target.base}: "{text}".', late=True)


def _no_operator(target: ty.SqlType, source: ty.SqlType, expression: exp.Expr) -> OperatorError:
    return OperatorError(f"operator does not exist: {ty.backticked(target)} = "
                         f"{ty.backticked(source)} ({ksql_text(expression)})\n"
                         "Hint: You might need to add explicit type casts.", late=True)


def _constructor(expression: exp.Expr) -> str | None:
    if isinstance(expression, exp.Array):
        return "ARRAY"
    if isinstance(expression, exp.Anonymous | exp.Struct | exp.Map | exp.VarMap):
        name = str(expression.name).upper() if isinstance(expression, exp.Anonymous) else ""
        kinds = {exp.Struct: "STRUCT", exp.Map: "MAP", exp.VarMap: "MAP"}
        return kinds.get(type(expression)) or (name if name in ("STRUCT", "MAP") else None)
    return None


def _map_entries(args: list[exp.Expr]) -> tuple[list[exp.Expr], list[exp.Expr]]:
    if args and all(isinstance(a, exp.PropertyEQ) for a in args):
        return [a.this for a in args], [a.expression for a in args]
    return args[0::2], args[1::2]


def _struct_values(args: list[exp.Expr]) -> list[exp.Expr]:
    return [a.expression if isinstance(a, exp.PropertyEQ) else
            a.this if isinstance(a, exp.Alias) else a for a in args]


def _string_literal(expression: exp.Expr) -> str | None:
    if isinstance(expression, exp.Literal) and expression.is_string:
        return str(expression.this)
    return None


def _is_literal(expression: exp.Expr) -> bool:
    if isinstance(expression, exp.Neg | exp.Paren):
        return _is_literal(expression.this)
    return isinstance(expression, exp.Literal | exp.Boolean)


ColumnText = Callable[[exp.Column], str]


def ksql_text(expression: exp.Expr, column: ColumnText | None = None) -> str:
    """An expression as ksqlDB's messages print it: ``(ID = '10')``, ``null``, ``ARRAY[1, 2]``;
    ``column`` names a column reference (by default as written, ``T.ID``)."""
    def text(node: exp.Expr) -> str:
        return ksql_text(node, column)

    if isinstance(expression, exp.Null):
        return "null"
    if isinstance(expression, exp.Boolean):
        return "true" if expression.this else "false"
    if isinstance(expression, exp.Column):
        if column is not None:
            return column(expression)
        return ".".join(p for p in (expression.table, expression.name) if p)
    operator = COMPARISONS.get(type(expression))
    symbol = operator.symbol if operator else _ARITHMETIC.get(type(expression))
    if symbol is not None and isinstance(expression, exp.Binary):
        return f"({text(expression.left)} {symbol} {text(expression.right)})"
    if isinstance(expression, exp.Array):
        return f"ARRAY[{', '.join(text(e) for e in expression.expressions)}]"
    if isinstance(expression, exp.PropertyEQ):
        return f"{text(expression.this)}:={text(expression.expression)}"
    if isinstance(expression, exp.Anonymous):
        return f"{str(expression.name).upper()}({', '.join(text(a) for a in expression.expressions)})"
    if isinstance(expression, exp.Paren):
        return text(expression.this)
    return _logical_text(expression, text)


def _logical_text(expression: exp.Expr, text: Callable[[exp.Expr], str]) -> str:
    """AND, OR, NOT, CAST and a lambda as ksqlDB's messages print them; other nodes as sqlglot
    does."""
    if isinstance(expression, exp.And | exp.Or):
        word = "AND" if isinstance(expression, exp.And) else "OR"
        return f"({text(expression.left)} {word} {text(expression.right)})"
    if isinstance(expression, exp.Not):
        return f"(NOT {text(expression.this)})"
    if isinstance(expression, exp.Cast) and (target := expression.args.get("to")) is not None:
        return f"CAST({text(expression.this)} AS {_cast_target(target)})"
    if isinstance(expression, exp.Lambda):
        parameters = ", ".join(p.name for p in expression.expressions)
        return f"({parameters}) => {text(expression.this)}"
    return expression.sql()


def _cast_target(target: exp.Expr) -> str:
    """A CAST's type as ksqlDB prints it (``INTEGER``, ``DECIMAL(4, 2)``)."""
    written = target.sql().upper()
    return {"INT": "INTEGER"}.get(written, written.replace(",", ", ").replace(",  ", ", "))


# -- translation ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Operand:
    """An operand already in Spark SQL, with its ksqlDB type (None: the NULL literal)."""

    spark: exp.Expr
    type: ty.SqlType | None


def compare(operator: Comparison, left: Operand, right: Operand) -> exp.Expr:
    """``left <operator> right`` with ksqlDB's meaning."""
    left_side, right_side = _comparable_pair(left, right)
    if operator.null_safe:
        same = exp.NullSafeEQ(this=exp.Paren(this=left_side),
                              expression=exp.Paren(this=right_side))
        return same if operator.name == "IS_NOT_DISTINCT_FROM" else exp.Not(this=same)
    kind = next(k for k, c in COMPARISONS.items() if c == operator)
    assert issubclass(kind, exp.Binary)
    return _false_if_null(sql.binary(kind, left_side, right_side))


def _false_if_null(condition: exp.Expr) -> exp.Expr:
    return sql.fn("coalesce", condition, sql.lit(False))


def _comparable_pair(left: Operand, right: Operand) -> tuple[exp.Expr, exp.Expr]:
    """Both operands in one type Spark compares with ksqlDB's meaning."""
    a, b = left.type, right.type
    if a is None or b is None:
        return left.spark, right.spark
    for this, other in ((a, b), (b, a)):
        if this == ty.STRING and other.base in _TIMES:
            return (casts.cast(left.spark, a, other) if this is a else left.spark,
                    casts.cast(right.spark, b, other) if this is b else right.spark)
    if a.base in _COLLECTIONS:
        common = a if a == b else (coerce(b, a, False) or coerce(a, b, False))
        if common is None:
            return sql.lit(0), sql.lit(1)
        return (comparable(casts.cast(left.spark, a, common), common),
                comparable(casts.cast(right.spark, b, common), common))
    return left.spark, right.spark


def comparable(value: exp.Expr, sql_type: ty.SqlType) -> exp.Expr:
    """``value`` in a form Spark's ``=`` compares as ksqlDB does: MAPs (which Spark cannot
    compare) as their entries sorted by key, at any depth."""
    if not ty.contains_map(sql_type):
        return value
    if isinstance(sql_type, ty.MapType):
        entry = sql.var("m")
        entries = sql.fn("transform", sql.fn("map_entries", value), sql.lam(sql.fn(
            "struct", exp.alias_(exp.Dot(this=entry, expression=exp.to_identifier("key")), "k"),
            exp.alias_(comparable(exp.Dot(this=entry, expression=exp.to_identifier("value")),
                                  sql_type.value), "v")), "m"))
        return sql.fn("array_sort", entries)
    if isinstance(sql_type, ty.ArrayType):
        return sql.fn("transform", value, sql.lam(comparable(sql.var("a"), sql_type.element),
                                                  "a"))
    assert isinstance(sql_type, ty.StructType)
    fields: list[exp.Expr] = []
    for name, field_type in sql_type.fields:
        field = exp.Dot(this=value, expression=exp.to_identifier(name, quoted=True))
        fields += [sql.lit(name), comparable(field, field_type)]
    return sql.if_(sql.is_null(value), sql.null(), sql.fn("named_struct", *fields))


def between(value: Operand, low: Operand, high: Operand) -> exp.Expr:
    return exp.Paren(this=exp.And(this=compare(COMPARISONS[exp.GTE], value, low),
                                  expression=compare(COMPARISONS[exp.LTE], value, high)))


def in_list(value: Operand, items: Sequence[Operand], common: ty.SqlType | None) -> exp.Expr:
    """``value IN (items)``: items coerced to ``common``, NULL literals dropped."""
    candidates = [i for i in items if i.type is not None]
    if common is None or value.type is None or not candidates:
        return sql.lit(False)
    wanted = Operand(casts.cast(value.spark, value.type, common), common)
    equal = COMPARISONS[exp.EQ]
    matches = [compare(equal, wanted, Operand(_coerced(i, common), common)) for i in candidates]
    condition = matches[0]
    for match in matches[1:]:
        condition = exp.Or(this=condition, expression=match)
    return exp.Paren(this=condition)


def _coerced(item: Operand, common: ty.SqlType) -> exp.Expr:
    assert item.type is not None
    if item.type == ty.STRING and common.base in _NUMBERS:
        return sql.cast(sql.fn("trim", item.spark), common)
    if item.type == ty.STRING and common == ty.BOOLEAN:
        return casts.cast(item.spark, ty.STRING, ty.BOOLEAN)
    return casts.cast(item.spark, item.type, common)


_INFINITY = "Infinity"


def arithmetic(symbol: str, left: Operand, right: Operand, result: ty.SqlType) -> exp.Expr:
    """``left <symbol> right`` of ksqlDB type ``result``."""
    if result == ty.STRING:
        return sql.fn("concat", *(sql.fn("coalesce", o.spark, sql.lit("null"))
                                  for o in (left, right)))
    kind = next(k for k, s in _ARITHMETIC.items() if s == symbol)
    assert issubclass(kind, exp.Binary)
    if isinstance(result, ty.DecimalType):
        a, b = (sql.cast(o.spark, as_decimal(o.type)) if o.type is not None else o.spark
                for o in (left, right))
        value = sql.cast(sql.binary(kind, a, b), result)
        if symbol == "/":  # ksqlDB computes the quotient exactly or fails (NULL)
            exact = sql.eq(sql.mul(value, b), a)
            return sql.if_(exact, value, sql.cast(sql.null(), result))
        return value
    if result in (ty.INTEGER, ty.BIGINT) and symbol == "/":
        return sql.cast(exp.IntDiv(this=exp.Paren(this=left.spark),
                                   expression=exp.Paren(this=right.spark)), result)
    a, b = (sql.cast(o.spark, ty.DOUBLE) if result == ty.DOUBLE and o.type != ty.DOUBLE
            else o.spark for o in (left, right))
    computed = sql.binary(kind, a, b)
    if result == ty.DOUBLE and symbol in ("/", "%"):
        return sql.if_(sql.eq(b, sql.lit(0)), _by_zero(symbol, a), computed)
    return exp.Paren(this=computed)


def _by_zero(symbol: str, dividend: exp.Expr) -> exp.Expr:
    """What Java's double arithmetic gives for ``x / 0`` and ``x % 0``."""
    nan = sql.cast(sql.lit("NaN"), ty.DOUBLE)
    if symbol == "%":
        return nan
    infinity = sql.cast(sql.lit(_INFINITY), ty.DOUBLE)
    return sql.case((sql.lt(sql.lit(0), dividend), infinity),
                    (sql.lt(dividend, sql.lit(0)), exp.Neg(this=infinity)), otherwise=nan)


def translation(node: exp.Expr, type_of: TypeOf) -> Callable[[], exp.Expr] | None:
    """How to translate ``node`` if it is an operator or a CAST: its operands' ksqlDB types are
    read now, from the typed tree, and the returned function builds the Spark SQL once the
    operands are translated (in place, in ``node``). None for other nodes."""
    comparison = COMPARISONS.get(type(node))
    if comparison is not None and isinstance(node, exp.Binary):
        binary = node
        left, right = type_of(binary.left), type_of(binary.right)
        return lambda: compare(comparison, Operand(binary.left, left), Operand(binary.right, right))
    if isinstance(node, exp.Between):
        bounded = node
        value, low, high = (type_of(bounded.args[k]) for k in ("this", "low", "high"))
        return lambda: between(Operand(bounded.this, value), Operand(bounded.args["low"], low),
                               Operand(bounded.args["high"], high))
    if isinstance(node, exp.In) and not node.args.get("query"):
        listed = node
        common = in_list_type(listed.this, listed.expressions, type_of)
        value, items = type_of(listed.this), [type_of(i) for i in listed.expressions]
        return lambda: in_list(Operand(listed.this, value), [
            Operand(e, t) for e, t in zip(listed.expressions, items, strict=True)], common)
    result = type_of(node)
    symbol = arithmetic_symbol(node)
    if symbol is not None and result is not None and isinstance(node, exp.Binary):
        operation = node
        left, right = type_of(operation.left), type_of(operation.right)
        return lambda: arithmetic(symbol, Operand(operation.left, left),
                                  Operand(operation.right, right), result)
    if isinstance(node, exp.Cast) and result is not None:
        converted = node
        source = type_of(converted.this)
        return lambda: casts.cast(converted.this, source, result)
    return None
