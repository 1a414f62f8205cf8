"""The shape of a ksqlDB function declaration, and how a call resolves against declarations.

A :class:`FunctionSpec` declares one ksqlDB function once: its names, its kind (scalar,
aggregate, table), its :class:`Signature` s (parameter patterns, a variadic last parameter, the
return-type rule), the arguments whose NULL makes the result NULL where Spark's built-in would
not, and its Spark translation (a function of a :class:`Call`: the already-translated sqlglot
arguments and their ksqlDB types, to a Spark SQL expression). Families of functions are tables
of specs in the sibling modules; :mod:`metastore.functions.library` indexes them.

:func:`resolve` follows ksqlDB's ``UdfIndex``: a call matches the signatures without implicit
casts first, then (scalar and table functions only, never aggregates) with them (INTEGER widens
to BIGINT, DECIMAL and DOUBLE; BIGINT to DECIMAL and DOUBLE; DECIMAL to DOUBLE; a STRING is
parsed as the DATE, TIME, TIMESTAMP or BYTES a parameter wants). Of the signatures that accept
a call, the non-variadic, the longest, the least generic wins; two that rank the same make the
call ambiguous (``GREATEST(INTEGER, BIGINT)``, ``GREATEST(null, null)``), as in ksqlDB. Generic
parameters bind to the first argument they meet; lambdas are typed with their inputs bound from
the other arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from sqlglot import exp

from metastore.sql import types as ty


class FunctionError(Exception):
    """A call no declaration accepts, worded as ksqlDB words it."""


class UnknownFunctionError(FunctionError):
    def __init__(self, name: str) -> None:
        super().__init__(f"Can't find any functions with the name '{name}'")
        self.name = name


class UntranslatableError(FunctionError):
    """A call (of these types, or with these arguments) Spark cannot compute with ksqlDB's meaning."""


class Kind(Enum):
    SCALAR = "scalar"
    AGGREGATE = "aggregate"
    TABLE = "table"


# -- parameter patterns ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Generic:
    """A type variable: bound by the first argument it meets, the same type everywhere else."""

    name: str

    def sql(self) -> str:
        return self.name


@dataclass(frozen=True)
class ArrayOf:
    element: Param

    def sql(self) -> str:
        return f"ARRAY<{self.element.sql()}>"


@dataclass(frozen=True)
class MapOf:
    key: Param
    value: Param

    def sql(self) -> str:
        return f"MAP<{self.key.sql()}, {self.value.sql()}>"


@dataclass(frozen=True)
class LambdaOf:
    """A lambda taking ``inputs`` and returning ``result`` (both may use generics)."""

    inputs: tuple[Param, ...]
    result: Param

    def sql(self) -> str:
        return f"LAMBDA({', '.join(p.sql() for p in self.inputs)}) => {self.result.sql()}"


@dataclass(frozen=True)
class Family:
    """Any type of one base family: DECIMAL of any precision, any STRUCT, or anything at all."""

    base: str

    def sql(self) -> str:
        return self.base


ANY_DECIMAL = Family("DECIMAL")
ANY_STRUCT = Family("STRUCT")
ANY = Family("ANY")
"""A value of any type, each argument its own (ksqlDB's ``VariadicArgs<Object>``)."""
INTERVAL_UNIT = Family("INTERVALUNIT")
"""A time unit written as a bare word: ``DATEADD(DAYS, 1, d)``."""

Param = ty.SqlType | Generic | ArrayOf | MapOf | LambdaOf | Family

T, U, K, V, S, R = (Generic(n) for n in ("T", "U", "K", "V", "S", "R"))


# -- arguments as the typer sees them -------------------------------------------------------------

@dataclass(frozen=True)
class LambdaArgument:
    """A lambda argument: its arity, and how to type its body once its inputs' types are known."""

    arity: int
    body_type: Callable[[tuple[ty.SqlType, ...]], ty.SqlType] = field(compare=False)


@dataclass(frozen=True)
class UnitArgument:
    unit: str


Argument = ty.SqlType | LambdaArgument | UnitArgument | None
"""One argument of a call: its type, a lambda, a time unit, or None for the NULL literal."""

TIME_UNITS = frozenset({"DAYS", "HOURS", "MINUTES", "SECONDS", "MILLISECONDS", "MICROSECONDS",
                        "NANOSECONDS", "DAY", "HOUR", "MINUTE", "SECOND", "MILLISECOND"})

Bindings = Mapping[str, ty.SqlType]
ReturnRule = Callable[[Sequence[Argument], Bindings], ty.SqlType]
IntermediateRule = Callable[[Sequence[ty.SqlType | None], ty.SqlType], ty.SqlType]
"""An aggregate's intermediate type (what its state store keeps) from its arguments' types and
its return type."""


@dataclass(frozen=True)
class Signature:
    params: tuple[Param, ...]
    returns: Param | ReturnRule
    variadic: bool = False
    """The last parameter may be given any number of times (none included)."""
    repeated: int = -1
    """Which parameter is variadic (the last by default): ``TOPK(T, ANY..., INTEGER)``."""
    init_args: int = 0
    """How many trailing parameters an aggregate takes as literal constants (its UDAF
    factory's arguments: TOPK's k); a variadic one among them takes any number."""

    def init_arguments(self, count: int) -> int:
        """How many of a call's ``count`` arguments are trailing literal constants (the
        factory's ``String...`` of ksqlDB's MULTI_ARG takes all the call's last ones)."""
        if not self.init_args or not self.params:
            return 0
        at = self.repeated % len(self.params)
        if self.variadic and at >= len(self.params) - self.init_args:
            return max(self.init_args + count - len(self.params), 0)
        return self.init_args

    def sql(self, name: str) -> str:
        shown = [p.sql() for p in self.params]
        if self.variadic and shown:
            shown[self.repeated] += "..."
        return f"{name}({', '.join(shown)})"


def first_argument(args: Sequence[Argument], _: Bindings) -> ty.SqlType:
    """A return-type rule: the type of the first argument (a DECIMAL keeps its precision)."""
    first = args[0] if args else None
    return first if isinstance(first, ty.SqlType) else ty.STRING


def array_of_first(args: Sequence[Argument], bindings: Bindings) -> ty.SqlType:
    return ty.ArrayType(first_argument(args, bindings))


def sig(*params: Param, returns: Param | ReturnRule, variadic: bool = False,
        repeated: int = -1, init_args: int = 0) -> Signature:
    return Signature(tuple(params), returns, variadic, repeated, init_args)


def overloads(types: Sequence[ty.SqlType | Family],
              make: Callable[[ty.SqlType | Family], Signature]) -> tuple[Signature, ...]:
    """One signature per type: ``overloads(NUMBERS, lambda t: sig(t, returns=t))``."""
    return tuple(make(t) for t in types)


# -- translation ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Call:
    """A call being translated: its arguments already in Spark SQL, with their ksqlDB types
    (None where unknown, or for a NULL literal) and the call's own ksqlDB type."""

    name: str
    args: tuple[exp.Expr, ...]
    types: tuple[ty.SqlType | None, ...]
    returns: ty.SqlType | None
    row_offset: exp.Expr | None = None
    """The source offset column (what *_BY_OFFSET aggregates order by), when there is one."""
    config: Mapping[str, object] = field(default_factory=dict)
    """The ksqlDB configuration the query runs with (``ksql.functions.collect_list.limit``)."""

    def type(self, index: int) -> ty.SqlType | None:
        return self.types[index] if index < len(self.types) else None


Translation = Callable[[Call], exp.Expr]

ARITHMETIC_OPERANDS = "ksql_arithmetic"
"""Where a translated numeric ``+ - * / %`` of the query keeps its operands (in the node's
``meta``): ksqlDB's generated Java throws on such arithmetic of a NULL."""


class SharedOperands:
    """The operand trees of a translated arithmetic node, kept in its ``meta``. A copy of the
    tree shares them instead of copying them: sqlglot deep-copies ``meta`` with every copy, and
    nested operands copied at each level would cost time exponential in the expression's depth."""

    __slots__ = ("trees",)

    def __init__(self, trees: tuple[exp.Expr, ...]) -> None:
        self.trees = trees

    def __deepcopy__(self, memo: dict[int, object]) -> SharedOperands:
        return self


def literal_int(expression: exp.Expr) -> int | None:
    """The value of an integer literal (``-2`` included), else None."""
    if isinstance(expression, exp.Neg):
        inner = literal_int(expression.this)
        return None if inner is None else -inner
    if isinstance(expression, exp.Paren):
        return literal_int(expression.this)
    if isinstance(expression, exp.Literal) and not expression.is_string:
        text = str(expression.this)
        return int(text) if text.lstrip("-").isdigit() else None
    return None


def literal_text(expression: exp.Expr) -> str | None:
    if isinstance(expression, exp.Literal) and expression.is_string:
        return str(expression.this)
    return None


@dataclass(frozen=True)
class FunctionSpec:
    names: tuple[str, ...]
    kind: Kind
    signatures: tuple[Signature, ...]
    spark: Translation | None = None
    """How Spark computes it; None when it cannot (yet): ``unsupported`` says why."""
    unsupported: str = "no Spark translation is declared"
    null_if_null: tuple[int, ...] = ()
    """Arguments whose NULL makes ksqlDB's result NULL where the Spark translation would not."""
    variadic_any: bool = False
    """Arguments are not checked (the function types its own calls in ``signatures[0]``)."""
    undoable: bool = False
    """An aggregate that can take a value back out (ksqlDB's TableAggregationFunction), so it
    can aggregate a table's changelog, where an update replaces a row."""
    intermediate: IntermediateRule | None = None
    """An aggregate's intermediate type (ksqlDB's ``Udaf`` aggregate type, which the query's
    value format must be able to hold), when it is not its return type."""
    raises: bool = False
    """ksqlDB's function throws where its translation gives NULL from arguments none of which
    is NULL (text its pattern does not match, an unknown encoding): a record processing error
    (:mod:`metastore.functions.failures`)."""

    @property
    def name(self) -> str:
        return self.names[0].upper()

    @property
    def declared(self) -> str:
        """The name as ksqlDB declares it, which its messages quote (``datesub``, ``LPad``)."""
        return self.names[0]


def spec(names: str | tuple[str, ...], kind: Kind, signatures: Sequence[Signature],
         spark: Translation | None = None, *, unsupported: str = "",
         null_if_null: tuple[int, ...] = (), variadic_any: bool = False,
         undoable: bool = False, intermediate: IntermediateRule | None = None,
         raises: bool = False) -> FunctionSpec:
    named = (names,) if isinstance(names, str) else names
    return FunctionSpec(named, kind, tuple(signatures), spark,
                        unsupported or "no Spark translation is declared", null_if_null,
                        variadic_any, undoable, intermediate, raises)


def scalar(names: str | tuple[str, ...], *signatures: Signature,
           spark: Translation | None = None, unsupported: str = "",
           null_if_null: tuple[int, ...] = (), raises: bool = False) -> FunctionSpec:
    return spec(names, Kind.SCALAR, signatures, spark, unsupported=unsupported,
                null_if_null=null_if_null, raises=raises)


# -- resolution -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Resolution:
    spec: FunctionSpec
    signature: Signature
    returns: ty.SqlType
    bindings: Bindings
    params: tuple[ty.SqlType, ...] = ()
    """The type each argument is taken as (what a NULL literal argument stands for)."""


_RANK = {"INTEGER": 1, "BIGINT": 2, "DECIMAL": 3, "DOUBLE": 4}


def widening(actual: ty.SqlType, declared: ty.SqlType | Family) -> int | None:
    """How far ``actual`` widens implicitly to ``declared`` (0: it is it), None if it cannot."""
    if actual == declared or (isinstance(declared, Family) and declared.base == actual.base):
        return 0
    source, target = _RANK.get(actual.base), _RANK.get(declared.base)
    if source is None or target is None or target <= source:
        return None
    return target - source


def as_decimal(sql_type: ty.SqlType) -> ty.DecimalType:
    """The DECIMAL an INTEGER or BIGINT widens to (a DECIMAL stays itself)."""
    if isinstance(sql_type, ty.DecimalType):
        return sql_type
    return ty.DecimalType(10 if sql_type == ty.INTEGER else 19, 0)


def wider(left: ty.SqlType, right: ty.SqlType) -> ty.SqlType | None:
    """The type both numbers widen to (DECIMALs to one holding both), None if there is none."""
    if left == right:
        return left
    if isinstance(left, ty.DecimalType) or isinstance(right, ty.DecimalType):
        if ty.DOUBLE in (left, right):
            return ty.DOUBLE
        if left.base not in _RANK or right.base not in _RANK:
            return None
        a, b = as_decimal(left), as_decimal(right)
        scale = max(a.scale, b.scale)
        return ty.DecimalType(min(max(a.precision - a.scale, b.precision - b.scale) + scale, 38),
                              scale)
    if widening(left, right) is not None:
        return right
    if widening(right, left) is not None:
        return left
    return None


PARSED_FROM_STRING = frozenset({"DATE", "TIME", "TIMESTAMP", "BYTES"})
"""What a STRING argument implicitly converts to when a function wants it (ksqlDB's
``SqlBaseType.canImplicitlyCast``): it is parsed as ``CAST`` parses it."""


def parsing(actual: ty.SqlType, declared: ty.SqlType | Family) -> int | None:
    """1 when a STRING ``actual`` is implicitly parsed as the ``declared`` DATE, TIME, TIMESTAMP
    or BYTES, else None."""
    if actual == ty.STRING and isinstance(declared, ty.Primitive) \
            and declared.name in PARSED_FROM_STRING:
        return 1
    return None


def parses(actual: ty.SqlType | None, param: ty.SqlType | None) -> bool:
    """Whether an argument of type ``actual`` reaches a parameter of type ``param`` by the
    implicit parsing of a STRING (at any depth: an ARRAY<STRING> as an ARRAY<DATE>)."""
    if actual is None or param is None or actual == param:
        return False
    if isinstance(actual, ty.ArrayType) and isinstance(param, ty.ArrayType):
        return parses(actual.element, param.element)
    if isinstance(actual, ty.MapType) and isinstance(param, ty.MapType):
        return parses(actual.key, param.key) or parses(actual.value, param.value)
    return parsing(actual, param) is not None


class _Matcher:
    def __init__(self, allow_casts: bool) -> None:
        self.allow_casts = allow_casts
        self.bindings: dict[str, ty.SqlType] = {}

    def accept(self, param: Param, arg: Argument) -> bool:
        if arg is None:
            return not isinstance(param, LambdaOf) and param != INTERVAL_UNIT
        if isinstance(arg, UnitArgument) or param == INTERVAL_UNIT:
            return isinstance(arg, UnitArgument) and param == INTERVAL_UNIT
        if isinstance(param, LambdaOf) or isinstance(arg, LambdaArgument):
            return (isinstance(param, LambdaOf) and isinstance(arg, LambdaArgument)
                    and self._lambda(param, arg))
        if isinstance(param, Generic):
            return self._generic(param, arg)
        if isinstance(param, ArrayOf):
            return isinstance(arg, ty.ArrayType) and self.accept(param.element, arg.element)
        if isinstance(param, MapOf):
            return (isinstance(arg, ty.MapType) and self.accept(param.key, arg.key)
                    and self.accept(param.value, arg.value))
        if param == ANY_STRUCT:
            return isinstance(arg, ty.StructType)
        if param == ANY:
            return True
        assert isinstance(param, ty.SqlType | Family)
        distance = widening(arg, param)
        if distance is None and self.allow_casts:
            distance = parsing(arg, param)
        return distance is not None and (distance == 0 or self.allow_casts)

    def _generic(self, param: Generic, arg: ty.SqlType) -> bool:
        bound = self.bindings.get(param.name)
        if bound is None or bound == arg:
            self.bindings[param.name] = arg
            return True
        common = wider(bound, arg) if self.allow_casts else None
        if common is None:
            return False
        self.bindings[param.name] = common
        return True

    def _lambda(self, param: LambdaOf, arg: LambdaArgument) -> bool:
        if arg.arity != len(param.inputs):
            return False
        inputs = tuple(substitute(p, self.bindings) for p in param.inputs)
        return self.accept(param.result, arg.body_type(inputs))


def substitute(param: Param, bindings: Bindings) -> ty.SqlType:
    """The type a pattern stands for once its generics are bound (unbound ones read as STRING)."""
    if isinstance(param, Generic):
        return bindings.get(param.name, ty.STRING)
    if isinstance(param, ArrayOf):
        return ty.ArrayType(substitute(param.element, bindings))
    if isinstance(param, MapOf):
        return ty.MapType(substitute(param.key, bindings), substitute(param.value, bindings))
    if isinstance(param, LambdaOf):
        return substitute(param.result, bindings)
    if isinstance(param, Family):
        return ty.DOUBLE if param == ANY_DECIMAL else ty.STRING
    return param


def _expand(signature: Signature, count: int) -> tuple[Param, ...] | None:
    params = signature.params
    if not signature.variadic:
        return params if len(params) == count else None
    if count < len(params) - 1 or not params:
        return None
    at = signature.repeated % len(params)
    return params[:at] + (params[at],) * (count - len(params) + 1) + params[at + 1:]


def resolve(function: FunctionSpec, args: Sequence[Argument]) -> Resolution:
    """The signature of ``function`` a call with ``args`` resolves to, and its return type."""
    if function.variadic_any:
        signature = function.signatures[0]
        return Resolution(function, signature, _returns(signature, args, {}), {})
    for allow_casts in (False, True) if function.kind is not Kind.AGGREGATE else (False,):
        matched: list[tuple[Signature, dict[str, ty.SqlType]]] = []
        for signature in function.signatures:
            params = _expand(signature, len(args))
            if params is None:
                continue
            matcher = _Matcher(allow_casts)
            if all(matcher.accept(p, a) for p, a in zip(params, args, strict=True)):
                matched.append((signature, matcher.bindings))
        if matched:
            matched.sort(key=lambda m: _preference(m[0]), reverse=True)
            if len(matched) > 1 and _preference(matched[0][0]) == _preference(matched[1][0]):
                raise FunctionError(ambiguity_message(function, args))
            signature, bindings = matched[0]
            expanded = _expand(signature, len(args)) or ()
            params = tuple(ty.STRING if isinstance(p, LambdaOf) or p == INTERVAL_UNIT
                           else substitute(p, bindings) for p in expanded)
            return Resolution(function, signature, _returns(signature, args, bindings), bindings,
                              params)
    raise FunctionError(no_match_message(function, args))


def _preference(signature: Signature) -> tuple[int, int, int, int, int]:
    """How ksqlDB's ``UdfIndex`` ranks signatures that all accept a call (greater first): not
    variadic, more parameters, fewer generic ones, no ``Object...``, the variadic one later.
    Two that rank the same make the call ambiguous."""
    params = signature.params
    generic = sum(1 for p in params if _has_generics(p))
    return (0 if signature.variadic else 1, len(params), -generic,
            0 if signature.variadic and params and params[signature.repeated] == ANY else 1,
            signature.repeated % len(params) if signature.variadic and params else -1)


def _has_generics(param: Param) -> bool:
    if isinstance(param, Generic) or param == ANY:
        return True
    if isinstance(param, ArrayOf):
        return _has_generics(param.element)
    if isinstance(param, MapOf):
        return _has_generics(param.key) or _has_generics(param.value)
    if isinstance(param, LambdaOf):
        return any(_has_generics(p) for p in (*param.inputs, param.result))
    return False


def _returns(signature: Signature, args: Sequence[Argument], bindings: Bindings) -> ty.SqlType:
    rule = signature.returns
    if isinstance(rule, ty.SqlType | Generic | ArrayOf | MapOf | LambdaOf | Family):
        return substitute(rule, bindings)
    return rule(args, bindings)


def describe(arg: Argument) -> str:
    if arg is None:
        return "null"
    if isinstance(arg, LambdaArgument):
        return f"LAMBDA({arg.arity})"
    if isinstance(arg, UnitArgument):
        return arg.unit
    return arg.sql()


def ambiguity_message(function: FunctionSpec, args: Sequence[Argument]) -> str:
    calls = "\n".join(s.sql(function.name) for s in function.signatures)
    return (f"Function '{function.declared}' cannot be resolved due to ambiguous method "
            f"parameters ({', '.join(describe(a) for a in args)}).\nUse CAST() to explicitly "
            "cast your parameters to one of the supported function calls.\nValid function calls "
            f"are:\n{calls}\nFor detailed information on a function run: DESCRIBE FUNCTION "
            "<Function-Name>;")


def no_match_message(function: FunctionSpec, args: Sequence[Argument]) -> str:
    alternatives = "\n".join(s.sql(function.name) for s in function.signatures)
    return (f"Function '{function.declared}' does not accept parameters "
            f"({', '.join(describe(a) for a in args)}).\nValid alternatives are:\n{alternatives}\n"
            "For detailed information on a function run: DESCRIBE FUNCTION <Function-Name>;")
