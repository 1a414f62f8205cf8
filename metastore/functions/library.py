"""Every ksqlDB function, indexed by name, and the operations the rest of metastore asks of them:
the name of a call (:func:`function_name`), its declaration (:func:`lookup`), its type
(:func:`resolve_call`), whether it aggregates, why Spark cannot run it (:func:`spark_problem`)
and the Spark SQL of a whole expression tree (:func:`to_spark`).

The typer records the ksqlDB type of every expression it types in the node's ``meta`` under
:data:`KSQL_TYPE` (see :func:`annotate`); :func:`to_spark` reads it back, so a translation knows
its arguments' types without typing the tree again (``meta`` survives ``copy()``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from sqlglot import exp

from metastore.core.limits import allow_deep_expressions
from metastore.functions import (
    aggregates,
    casts,
    collections,
    conditionals,
    datetime,
    failures,
    json,
    maths,
    operators,
    strings,
    tables,
    urls,
)
from metastore.functions import sparksql as sql
from metastore.functions.registry import (
    ARITHMETIC_OPERANDS,
    Argument,
    Call,
    FunctionSpec,
    Kind,
    Resolution,
    SharedOperands,
    UnknownFunctionError,
    UntranslatableError,
    literal_int,
    parses,
    resolve,
)
from metastore.sql import types as ty

ALL: tuple[FunctionSpec, ...] = (
    *strings.FUNCTIONS, *maths.FUNCTIONS, *datetime.FUNCTIONS, *json.FUNCTIONS,
    *collections.FUNCTIONS, *urls.FUNCTIONS, *conditionals.FUNCTIONS, *aggregates.FUNCTIONS,
    *tables.FUNCTIONS,
)

allow_deep_expressions()  # typing, translating and planning recurse per expression level


def _index(specs: Sequence[FunctionSpec]) -> dict[str, FunctionSpec]:
    index: dict[str, FunctionSpec] = {}
    for declared in specs:
        for name in declared.names:
            assert name.upper() not in index, f"{name} is declared twice"
            index[name.upper()] = declared
    return index


_BY_NAME = _index(ALL)
_BUILT_IN = frozenset(_BY_NAME)


def is_built_in(name: str) -> bool:
    return name.upper() in _BUILT_IN


def install(specs: Sequence[FunctionSpec]) -> None:
    """Add extension functions to the index (:mod:`metastore.functions.extensions` checks
    their names first: it alone calls this)."""
    for function in specs:
        for name in function.names:
            _BY_NAME[name.upper()] = function


def uninstall(specs: Sequence[FunctionSpec]) -> None:
    """Take extension functions out of the index again (built-ins stay)."""
    for function in specs:
        for name in function.names:
            if name.upper() not in _BUILT_IN and _BY_NAME.get(name.upper()) is function:
                del _BY_NAME[name.upper()]

KSQL_TYPE = "ksql_type"
KSQL_PARAMS = "ksql_params"

_SYNTAX_NAMES: dict[type[exp.Expr], str] = {
    exp.If: "IF", exp.Case: "CASE", exp.Cast: "CAST", exp.Array: "ARRAY",
}


def function_name(node: exp.Expr) -> str:
    """The ksqlDB name of a call as written (upper-cased)."""
    if isinstance(node, exp.Anonymous):
        return str(node.name).upper()
    for syntax, name in _SYNTAX_NAMES.items():
        if isinstance(node, syntax):
            return name
    return node.sql_name() if isinstance(node, exp.Func) else ""


def lookup(name: str) -> FunctionSpec | None:
    return _BY_NAME.get(name.upper())


def declared(name: str) -> FunctionSpec:
    """The declaration of ``name``; ksqlDB's error when there is none."""
    found = lookup(name)
    if found is None:
        raise UnknownFunctionError(name)
    return found


def names(kind: Kind | None = None) -> frozenset[str]:
    return frozenset(n for n, s in _BY_NAME.items() if kind is None or s.kind is kind)


def is_aggregate(node: exp.Expr) -> bool:
    if not isinstance(node, exp.Anonymous):
        return False
    found = lookup(function_name(node))
    return found is not None and found.kind is Kind.AGGREGATE


def is_table_function(node: exp.Expr) -> bool:
    if not isinstance(node, exp.Anonymous):
        return False
    found = lookup(function_name(node))
    return found is not None and found.kind is Kind.TABLE


def intermediate_type(node: exp.Expr) -> ty.SqlType | None:
    """The intermediate type of a typed aggregate call (what ksqlDB's state store keeps for
    it): its declared rule's, else its return type; None if ``node`` is no typed aggregate."""
    found = lookup(function_name(node)) if is_aggregate(node) else None
    returns = ksql_type(node)
    if found is None or returns is None:
        return None
    if found.intermediate is None:
        return returns
    return found.intermediate([ksql_type(a) for a in arguments(node)], returns)


def arguments(node: exp.Expr) -> list[exp.Expr]:
    """A call's arguments in the order written (``COUNT(*)`` has none)."""
    return [a for a in node.iter_expressions() if not isinstance(a, exp.Star)]


def resolve_call(name: str, args: Sequence[Argument]) -> Resolution:
    return resolve(declared(name), args)


def annotate(node: exp.Expr, sql_type: ty.SqlType) -> ty.SqlType:
    node.meta[KSQL_TYPE] = sql_type
    return sql_type


def annotate_params(node: exp.Expr, params: Sequence[ty.SqlType]) -> None:
    """Record the types a call's arguments are taken as (its resolved signature's parameters),
    so the translation converts the arguments that reach them by an implicit parse."""
    node.meta[KSQL_PARAMS] = tuple(params)


def ksql_type(node: exp.Expr) -> ty.SqlType | None:
    found = node.meta.get(KSQL_TYPE) if node._meta is not None else None
    return found if isinstance(found, ty.SqlType) else None


def spark_problem(name: str) -> str | None:
    """Why Spark cannot compute the function ``name`` (None when it can, for some arguments)."""
    found = lookup(name)
    if found is None:
        return f"Can't find any functions with the name '{name}'"
    if found.spark is None:
        return f"the function {found.name} is not supported: {found.unsupported}"
    return None


@dataclass(frozen=True)
class SparkContext:
    """What a translation may need beyond the expression: the source offset column of
    *_BY_OFFSET, and a rewrite of the tree's other nodes (columns, struct access)."""

    row_offset: exp.Expr | None = None
    rewrite: Callable[[exp.Expr], exp.Expr] | None = None
    keep_undeclared: bool = False
    """Leave calls of undeclared names as they are: Spark built-ins a planner put in the tree
    (a query's own unknown functions were refused when it was analysed)."""
    config: Mapping[str, object] = field(default_factory=dict)
    """The ksqlDB configuration of the query (``ksql.functions.collect_set.limit``, ...)."""
    failures: list[failures.Failure] | None = None
    """Where to record the nodes whose NULL stands for ksqlDB's exception
    (:mod:`metastore.functions.failures`); None: not recorded."""


def to_spark(node: exp.Expr, context: SparkContext | None = None) -> exp.Expr:
    """``node`` (a typed ksqlDB expression) as Spark SQL with ksqlDB's meaning; the tree is
    rewritten in place and the new root returned. Raises :class:`UntranslatableError` with the
    reason when some part has no translation."""
    return _Translator(context or SparkContext()).translate(node)


class _Translator:
    def __init__(self, context: SparkContext) -> None:
        self.context = context
        self.within_lambdas: list[failures.Failure] = []
        """Failures in lambdas' bodies nothing there catches, until their calls lift them."""
        self.lambdas = 0
        """How many lambdas' bodies hold the node being translated."""

    def translate(self, node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Anonymous):
            return self._call(node)
        if isinstance(node, exp.Null) and (typed := ksql_type(node)) is not None:
            return sql.cast(node, typed)
        operator = operators.translation(node, _operand_type)
        arithmetic = (isinstance(node, exp.Binary) and operators.arithmetic_symbol(node) is not None
                      and ksql_type(node) not in (None, ty.STRING))
        element_types = tuple(_operand_type(e) for e in node.expressions) \
            if isinstance(node, exp.Array) else ()
        cast_source = _operand_type(node.this) if isinstance(node, exp.Cast) else None
        self.lambdas += isinstance(node, exp.Lambda)
        try:
            for child in list(node.iter_expressions()):
                new = self.translate(child)
                if new is not child:
                    child.replace(new)
        finally:
            self.lambdas -= isinstance(node, exp.Lambda)
        if operator is not None:
            result = operator()
            if arithmetic and isinstance(node, exp.Binary):
                result.meta[ARITHMETIC_OPERANDS] = SharedOperands((node.left, node.right))
            self._record(node, result, cast_source)
            return result
        if isinstance(node, exp.Array) and (array := lookup("ARRAY")) is not None \
                and array.spark is not None:
            elements = tuple(node.expressions)
            return array.spark(Call("ARRAY", elements, element_types, ksql_type(node)))
        if isinstance(node, exp.Bracket):
            return _element_at(node)
        rewrite = self.context.rewrite
        return rewrite(node) if rewrite is not None else node

    def _call(self, node: exp.Anonymous) -> exp.Expr:
        name = function_name(node)
        if self.context.keep_undeclared and lookup(name) is None:
            for argument in arguments(node):
                new = self.translate(argument)
                if new is not argument:
                    argument.replace(new)
            return node
        function = declared(name)
        if function.spark is None:
            raise UntranslatableError(f"the function {function.name} is not supported: "
                                 f"{function.unsupported}")
        originals = arguments(node)
        if name == "MAP":  # its keys and values in turn
            originals = [part for entry in originals for part in (
                (entry.this, entry.expression) if isinstance(entry, exp.PropertyEQ) else (entry,))]
        types = tuple(ksql_type(a) for a in originals)
        args = tuple(self.translate(a) for a in originals)
        params = node.meta.get(KSQL_PARAMS, ()) if node._meta is not None else ()
        if any(parses(t, p) for t, p in zip(types, params, strict=False)):
            # a STRING given for a DATE, TIME, TIMESTAMP or BYTES is parsed as CAST parses it
            wanted = [params[i] if i < len(params) else None for i in range(len(args))]
            args = tuple(casts.cast(a, t, p) if p is not None and parses(t, p) else a
                         for a, t, p in zip(args, types, wanted, strict=True))
            types = tuple(p if p is not None and parses(t, p) else t
                          for t, p in zip(types, wanted, strict=True))
        call = Call(function.name, args, types, ksql_type(node), self.context.row_offset,
                    self.context.config)
        result = sql.null_if_any_null(function.spark(call), *(
            args[i] for i in function.null_if_null if i < len(args)))
        if function.raises and self._recorded():
            self._keep(failures.of_call(node, function.name, args, result, ksql_type))
        if self.within_lambdas and any(isinstance(a, exp.Lambda) for a in args):
            result = self._lifted(node, call, result)
        return result

    def _recorded(self) -> bool:
        """Whether the failure of the node being translated is wanted: failures are recorded,
        or it sits in a lambda's body, where it may fail the lambda's whole call
        (:meth:`_lifted`)."""
        return self.context.failures is not None or self.lambdas > 0

    def _lifted(self, node: exp.Anonymous, call: Call, result: exp.Expr) -> exp.Expr:
        """``result``, or NULL where the failures in its lambdas' bodies throw on some element,
        as ksqlDB's call ends in the exception (recorded, as a failure of ``node``)."""
        lambdas = [a for a in call.args if isinstance(a, exp.Lambda)]
        found = [f for f in self.within_lambdas if any(f.within is lam for lam in lambdas)]
        lifted = collections.failing_element(
            call, [(f.within, f.condition, f.cause) for f in found if f.within is not None])
        self.within_lambdas = [f for f in self.within_lambdas if all(f is not g for g in found)]
        if lifted is None:  # REDUCE's: a step's NULL goes on in its state, logged nowhere
            return result
        condition, cause = lifted
        if self._recorded():
            self._keep(failures.of_lambda_call(node, call.name, condition.copy(), cause,
                                               ksql_type))
        return sql.if_(condition, sql.null(), result)

    def _record(self, node: exp.Expr, result: exp.Expr, cast_source: ty.SqlType | None) -> None:
        """Record the failure an operator or CAST ``node`` (its operands translated, in place;
        a CAST's of type ``cast_source``) may stand for, when failures are recorded."""
        if not self._recorded():
            return
        target = ksql_type(node)
        if isinstance(node, exp.Cast) and target is not None:
            self._keep(failures.of_cast(node, cast_source, target, node.this, result))
        elif isinstance(node, exp.Binary) and (symbol := operators.arithmetic_symbol(node)):
            self._keep(failures.of_arithmetic(node, symbol, ksql_type(node), node.left,
                                              node.right, result, ksql_type))

    def _keep(self, failure: failures.Failure | None) -> None:
        if failure is not None and failure.within is not None:
            self.within_lambdas.append(failure)
        elif failure is not None and self.context.failures is not None:
            self.context.failures.append(failure)


def _element_at(node: exp.Bracket) -> exp.Expr:
    """ksqlDB's ``a[i]``: arrays from 1, negative from the end, NULL out of range (and at 0,
    where Spark's element_at fails); a map's value by key."""
    container, index = node.this, node.expressions[0]
    element = sql.fn("element_at", container, index)
    is_map = isinstance(ksql_type(node.this), ty.MapType)
    fixed = literal_int(index)
    if is_map or (fixed is not None and fixed != 0):
        return element
    if fixed == 0:
        typed = ksql_type(node)
        return sql.cast(sql.null(), typed) if typed is not None else sql.null()
    return sql.if_(sql.eq(index, sql.lit(0)), sql.null(), element)


def _operand_type(node: exp.Expr) -> ty.SqlType | None:
    """An operand's ksqlDB type; None for the NULL literal."""
    return None if isinstance(node, exp.Null) else ksql_type(node)
