"""ARRAY, MAP and STRUCT functions, and the lambda invocations TRANSFORM, FILTER and REDUCE.

ksqlDB indexes arrays from 1 (negative indexes count from the end, out of range is NULL) and
answers NULL for a NULL collection, except where noted: ARRAY_CONTAINS of NULL is false, REDUCE
of NULL is its initial state, ARRAY_CONCAT and MAP_UNION of one NULL are the other collection.
The constructors ARRAY[...], MAP(k := v) and STRUCT(f := v) are typed by the typer (their types
depend on the names and values written); they are declared here for their translation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlglot import exp

from metastore.functions import sparksql as sql
from metastore.functions.registry import (
    ARITHMETIC_OPERANDS,
    Argument,
    ArrayOf,
    Bindings,
    Call,
    FunctionSpec,
    K,
    Kind,
    LambdaOf,
    MapOf,
    S,
    SharedOperands,
    Signature,
    T,
    Translation,
    U,
    UntranslatableError,
    V,
    scalar,
    sig,
    spec,
)
from metastore.sql import types as ty

INTEGER, BOOLEAN, STRING = ty.INTEGER, ty.BOOLEAN, ty.STRING


def apply(function: exp.Expr, *arguments: exp.Expr) -> exp.Expr:
    """The body of a lambda with its parameters replaced by ``arguments``, but inside a lambda
    of the body that binds a variable of the same name (a translation's own: ``e`` of a CAST's
    elements is that lambda's element, not a parameter ``e``)."""
    if not isinstance(function, exp.Lambda):
        raise UntranslatableError("a lambda was expected")
    names = [p.name.upper() for p in function.expressions]
    if len(names) != len(arguments):
        raise UntranslatableError("the lambda takes another number of arguments")
    return _substituted(function.this.copy(), dict(zip(names, arguments, strict=True)))


def _substituted(node: exp.Expr, replacing: dict[str, exp.Expr]) -> exp.Expr:
    """``node`` with each unqualified column ``replacing`` names replaced, where no lambda
    around it rebinds the name."""
    if isinstance(node, exp.Column) and not node.table and node.name.upper() in replacing:
        return replacing[node.name.upper()].copy()
    if isinstance(node, exp.Lambda):
        bound = {p.name.upper() for p in node.expressions}
        replacing = {name: value for name, value in replacing.items() if name not in bound}
    for key, value in list(node.args.items()):
        if key == "expressions" and isinstance(node, exp.Lambda):
            continue  # the parameters themselves
        if isinstance(value, exp.Expr):
            node.set(key, _substituted(value, replacing))
        elif isinstance(value, list):
            node.set(key, [_substituted(v, replacing) if isinstance(v, exp.Expr) else v
                           for v in value])
    return node


def _bound(prefix: str, functions: Sequence[exp.Expr]) -> str:
    """A variable the translation binds around ``functions``' bodies (a map's entry, REDUCE's
    state), numbered by how many lambdas hold the call: a lambda of the bodies' translation
    sits deeper, so it binds another (one fixed name would capture a lambda's own inside
    another of the same function)."""
    depth = 0
    node = functions[0].parent if functions else None
    while node is not None:
        depth += isinstance(node, exp.Lambda)
        node = node.parent
    return f"{prefix}{depth}"


def _entry(variable: str, field: str) -> exp.Expr:
    """The ``key`` or ``value`` of a map's entry bound to ``variable``."""
    return exp.Dot(this=sql.var(variable), expression=exp.to_identifier(field))


def _unguarded(node: exp.Expr) -> list[exp.Expr]:
    """The operands of the query's arithmetic in ``node`` evaluated whatever the values (not in
    a branch of a CASE or IF, nor in another lambda)."""
    if isinstance(node, exp.Lambda):
        return []
    if isinstance(node, exp.If):
        return _unguarded(node.this)
    if isinstance(node, exp.Case):
        return [n for branch in node.args.get("ifs") or [] for n in _unguarded(branch.this)]
    if isinstance(node, exp.Coalesce):
        return _unguarded(node.this)
    operands = node.meta.get(ARITHMETIC_OPERANDS) if node._meta is not None else None
    found: list[exp.Expr] = list(operands.trees) if isinstance(operands, SharedOperands) else []
    for child in node.iter_expressions():
        found += _unguarded(child)
    return found


def fails(function: exp.Expr) -> exp.Expr | None:
    """When a lambda fails for its inputs: ksqlDB's generated Java throws on arithmetic of a
    NULL, which makes the whole call NULL; None when it cannot fail so."""
    if not isinstance(function, exp.Lambda):
        return None
    operands = [o for o in _unguarded(function.this)
                if isinstance(o, exp.Expr) and not isinstance(o.unnest(), exp.Literal)]
    if not operands:
        return None
    return exp.Lambda(this=sql.any_null(*(o.copy() for o in operands)),
                      expressions=[p.copy() for p in function.expressions])


def _unless_failing(collection: exp.Expr, is_map: bool, functions: Sequence[exp.Expr],
                    result: exp.Expr) -> exp.Expr:
    """``result``, or NULL when a lambda fails on some element of ``collection``."""
    checks: list[exp.Expr] = []
    for function in functions:
        failing = fails(function)
        if failing is None:
            continue
        if is_map:
            variable = _bound("__e", functions)
            entry = apply(failing, _entry(variable, "key"), _entry(variable, "value"))
            checks.append(sql.fn("exists", sql.fn("map_entries", collection.copy()),
                                 sql.lam(entry, variable)))
        else:
            checks.append(sql.fn("exists", collection.copy(), failing))
    if not checks:
        return result
    condition = checks[0]
    for more in checks[1:]:
        condition = exp.Or(this=condition, expression=more)
    return sql.if_(sql.fn("coalesce", condition, sql.lit(False)), sql.null(), result)


LambdaFailure = tuple[exp.Expr, exp.Expr, exp.Expr]
"""A failure in a lambda's body that nothing there catches: the lambda, and the condition and
the cause of its exception (Spark SQL over the lambda's parameters)."""


def failing_element(call: Call, found: Sequence[LambdaFailure]) -> tuple[exp.Expr, exp.Expr] | None:
    """Whether a TRANSFORM's or FILTER's lambdas (``call``'s arguments) throw on some element of
    its collection, ``found`` saying where each throws, and the first such element's cause
    (NULL where none throws): ksqlDB's call ends in that exception. None for REDUCE, whose
    lambda's failure depends on the state before it (its NULL goes on in the state)."""
    if call.name not in ("TRANSFORM", "FILTER"):
        return None
    functions = [f for f in call.args[1:] if any(lam is f for lam, _, _ in found)]
    if not functions:
        return None
    is_map = isinstance(call.type(0), ty.MapType)
    variable = _bound("__e", call.args[1:]) if is_map else None
    conditions: list[exp.Expr] = []
    causes: list[exp.Expr] = []
    for function in functions:
        own = [(condition, cause) for lam, condition, cause in found if lam is function]
        fails_here = _any(c.copy() for c, _ in own)
        cause_here = sql.fn("coalesce", *(
            sql.if_(sql.fn("coalesce", c.copy(), exp.false()), why.copy(), sql.null())
            for c, why in own))
        if variable is not None:  # each entry's key and value for the lambda's parameters
            entry = (_entry(variable, "key"), _entry(variable, "value"))
            fails_here = apply(sql.lam(fails_here, *_names(function)), *entry)
            cause_here = apply(sql.lam(cause_here, *_names(function)), *entry)
        conditions.append(fails_here)
        causes.append(cause_here)
    collection = call.args[0]
    elements = sql.fn("map_entries", collection.copy()) if is_map else collection.copy()
    names = [variable] if variable is not None else _names(functions[0])
    condition = sql.fn("exists", elements, sql.lam(_any(conditions), *names))
    first = sql.fn("element_at", sql.fn("filter", sql.fn(
        "transform", elements.copy(), sql.lam(sql.fn("coalesce", *causes), *names)),
        sql.lam(exp.Not(this=sql.is_null(sql.var("__c"))), "__c")), sql.lit(1))
    return condition, sql.if_(sql.fn("coalesce", condition.copy(), exp.false()), first,
                              sql.null())


def _names(function: exp.Expr) -> list[str]:
    """A lambda's parameters' names."""
    return [p.name for p in function.expressions] if isinstance(function, exp.Lambda) else []


def _any(conditions: Iterable[exp.Expr]) -> exp.Expr:
    """Whether any of ``conditions`` holds."""
    found = [sql.fn("coalesce", c, exp.false()) for c in conditions]
    return found[0] if len(found) == 1 else exp.or_(*found, copy=False)


def _transform(call: Call) -> exp.Expr:
    """A lambda failing on one element makes the whole result NULL (see :func:`fails`)."""
    if len(call.args) == 2:
        collection, function = call.args
        return _unless_failing(collection, False, [function],
                               sql.fn("transform", collection, function))
    collection, key_function, value_function = call.args
    variable = _bound("__e", (key_function, value_function))
    key, value = _entry(variable, "key"), _entry(variable, "value")
    entry = _pair(apply(key_function, key, value), apply(value_function, key, value))
    returned = call.returns
    key_type = returned.key if isinstance(returned, ty.MapType) else STRING
    mapped = sql.fn("transform", sql.fn("map_entries", collection), sql.lam(entry, variable))
    result = sql.fn("map_from_entries", _keyed_entries(mapped, key_type))
    # ksqlDB collects the entries with Collectors.toMap, which fails on two entries of one key
    # (Spark's map would keep the last; one NULL key is a key, left out here but for STRING
    # keys, 'null') and on a NULL value: the result is NULL
    size = sql.fn("cardinality", collection.copy())
    if key_type == STRING:
        unique: exp.Expr = sql.eq(sql.fn("cardinality", result), size)
    else:
        null_keys = sql.fn("size", sql.fn("filter", mapped.copy(), sql.lam(
            sql.is_null(_entry("__p", "k")), "__p")))
        unique = exp.and_(sql.eq(sql.add(sql.fn("cardinality", result.copy()), null_keys),
                                 size), exp.LTE(this=null_keys.copy(), expression=sql.lit(1)))
    no_null = exp.Not(this=sql.fn("exists", mapped.copy(), sql.lam(
        sql.is_null(_entry("__p", "v")), "__p")))
    return _unless_failing(collection, True, [key_function, value_function],
                           sql.if_(exp.And(this=unique, expression=no_null), result.copy(),
                                   sql.null()))


def _filter(call: Call) -> exp.Expr:
    is_map = isinstance(call.type(0), ty.MapType)
    collection, function = call.args
    return _unless_failing(collection, is_map, [function],
                           sql.fn("map_filter" if is_map else "filter", collection, function))


def _reduce(call: Call) -> exp.Expr:
    collection, initial, function = call.args
    state = sql.cast(initial, call.returns) if call.returns is not None else initial
    if isinstance(call.type(0), ty.MapType):
        state_name, entry_name = _bound("__s", [function]), _bound("__e", [function])
        merge = sql.lam(apply(function, sql.var(state_name), _entry(entry_name, "key"),
                              _entry(entry_name, "value")), state_name, entry_name)
        reduced = sql.fn("aggregate", sql.fn("map_entries", collection), state, merge)
    else:
        reduced = sql.fn("aggregate", collection, state, function)
    return sql.if_(sql.is_null(collection), state, reduced)


def _either_or_both(spark_function: str) -> Translation:
    """ARRAY_CONCAT/MAP_UNION: NULL only when both are; one NULL side gives the other."""

    def translate(call: Call) -> exp.Expr:
        left, right = call.args
        both = sql.fn(spark_function, left, right)
        return sql.if_(sql.is_null(left), right, sql.if_(sql.is_null(right), left, both))
    return translate


def _map_union(call: Call) -> exp.Expr:
    left, right = call.args
    in_right = sql.fn("array_contains", sql.fn("map_keys", right), sql.var("__k"))
    kept = sql.fn("map_filter", left, sql.lam(exp.Not(this=in_right), "__k", "__v"))
    merged = sql.fn("map_concat", kept, right)
    return sql.if_(sql.is_null(left), right, sql.if_(sql.is_null(right), left, merged))


def _array_join(call: Call) -> exp.Expr:
    """Elements as Java prints them (NULL as ``null``); a NULL delimiter joins with nothing."""
    array, *delimiter = call.args
    text = sql.fn("coalesce", sql.cast(sql.var("__x"), STRING), sql.lit("null"))
    strings = sql.fn("transform", array, sql.lam(text, "__x"))
    joiner = sql.fn("coalesce", delimiter[0], sql.lit("")) if delimiter else sql.lit(",")
    return sql.fn("array_join", strings, joiner)


def _has_map(sql_type: ty.SqlType | None) -> bool:
    return sql_type is not None and any(isinstance(t, ty.MapType) for t in sql_type.walk())


def _identity(value: exp.Expr, sql_type: ty.SqlType | None) -> exp.Expr:
    """What two values are compared by, as Java's ``equals`` compares them: the value itself,
    or for a type holding MAPs (which Spark cannot compare) its JSON, a map's entries sorted."""
    if not _has_map(sql_type):
        return value
    if isinstance(sql_type, ty.MapType) and not _has_map(sql_type.value):
        value = sql.fn("array_sort", sql.fn("map_entries", value))
    return sql.fn("to_json", sql.fn("named_struct", sql.lit("v"), value))


def _element(call: Call) -> ty.SqlType | None:
    array = call.type(0)
    return array.element if isinstance(array, ty.ArrayType) else None


def _array_distinct(call: Call) -> exp.Expr:
    return distinct(call.args[0], _element(call))


def distinct(array: exp.Expr, element: ty.SqlType | None) -> exp.Expr:
    """The first of equal elements of ``array``, in order (one NULL kept), compared as Java's
    ``equals`` compares them, MAPs included (Spark's ``array_distinct`` cannot order them)."""
    if not _has_map(element):
        return sql.fn("array_distinct", array)
    earlier = sql.fn("slice", array.copy(), sql.lit(1), sql.var("__i"))
    same = exp.NullSafeEQ(this=_identity(sql.var("__y"), element),
                          expression=_identity(sql.var("__x"), element))
    seen = sql.fn("exists", earlier, sql.lam(same, "__y"))
    return sql.fn("filter", array, sql.lam(exp.Not(this=exp.Paren(this=seen)), "__x", "__i"))


def _array_remove(call: Call) -> exp.Expr:
    """Every element equal to the value removed (NULLs too, when it is NULL)."""
    array, victim = call.args
    element = _element(call)
    same = exp.NullSafeEQ(this=_identity(sql.var("__x"), element),
                          expression=_identity(victim, element))
    return sql.fn("filter", array, sql.lam(exp.Not(this=exp.Paren(this=same)), "__x"))


def _array_sort(call: Call) -> exp.Expr:
    """ksqlDB sorts NULLs last either way: Spark's ``array_sort`` does ascending,
    ``sort_array(a, false)`` descending (``sort_array(a, true)`` would put them first)."""
    array, *direction = call.args
    if not direction:
        return sql.fn("array_sort", array)
    named = sql.fn("upper", direction[0])
    ascending = exp.In(this=named, expressions=[sql.lit("ASC"), sql.lit("ASCENDING")])
    descending = exp.In(this=named.copy(), expressions=[sql.lit("DESC"), sql.lit("DESCENDING")])
    return sql.case((ascending, sql.fn("array_sort", array)),
                    (descending, sql.fn("sort_array", array.copy(), sql.lit(False))),
                    otherwise=sql.null())


def _as_map(call: Call) -> exp.Expr:
    """A key per element of the keys, with the value at its position, NULL past the values'
    end, a later key replacing an earlier one (ksqlDB's AS_MAP, a ``HashMap``), a NULL key
    kept as the MAP constructor keeps one: Spark's ``map_from_arrays`` refuses arrays of other
    lengths, and a NULL key."""
    keys, values = call.args
    entry = _pair(sql.var("__k"), sql.fn("get", values, sql.var("__i")))
    paired = sql.fn("map_from_entries", _keyed_entries(
        sql.fn("transform", keys, sql.lam(entry, "__k", "__i")), STRING))
    return sql.if_(sql.is_null(values.copy()), sql.null(), paired)


def _pair(key: exp.Expr, value: exp.Expr) -> exp.Expr:
    """A map's entry for ``map_from_entries``: a struct of its key ``k`` and its value ``v``."""
    return sql.fn("named_struct", sql.lit("k"), key, sql.lit("v"), value)


def _keyed_entries(entries: exp.Expr, key_type: ty.SqlType) -> exp.Expr:
    """``entries`` (:func:`_pair`'s) with a NULL key as ksqlDB's maps keep one (a ``HashMap``
    holds it): of STRING keys as ``'null'``, what ksqlDB's JSON writes for it; of others left
    out. Spark's maps hold no NULL key: ``map_from_entries`` fails the query on one."""
    key = _entry("__p", "k")
    if key_type == STRING:
        return sql.fn("transform", entries, sql.lam(
            _pair(sql.fn("coalesce", key, sql.lit("null")), _entry("__p", "v")), "__p"))
    return sql.fn("filter", entries, sql.lam(exp.Not(this=sql.is_null(key)), "__p"))


def _slice(call: Call) -> exp.Expr:
    array, start, end = call.args
    return sql.fn("slice", array, start, sql.add(sql.sub(end, start), sql.lit(1)))


def _entries(call: Call) -> exp.Expr:
    map_, sorted_ = call.args
    entries = sql.fn("map_entries", map_)
    ordered = sql.if_(sorted_, sql.fn("array_sort", entries), entries)
    return sql.cast(ordered, call.returns) if call.returns is not None else ordered


def conform(value: exp.Expr, actual: ty.SqlType | None, target: ty.SqlType) -> exp.Expr:
    """``value`` (of type ``actual``, None for NULL) as a ``target``: a STRUCT rebuilt with the
    target's fields (NULL where it has none), anything else cast."""
    if actual == target:
        return value
    if isinstance(actual, ty.StructType) and isinstance(target, ty.StructType):
        fields: list[exp.Expr] = []
        for name, field_type in target.fields:
            own = actual.field(name)
            part = (exp.Dot(this=value.copy(), expression=exp.to_identifier(name, quoted=True))
                    if own is not None else sql.null())
            fields += [sql.lit(name), conform(part, own, field_type)]
        return sql.if_(sql.is_null(value.copy()), sql.cast(sql.null(), target),
                       sql.fn("named_struct", *fields))
    return sql.cast(value, target)


def _array(call: Call) -> exp.Expr:
    """ARRAY[...]: every element as the array's element type, the common type the typer found
    (ksqlDB's ``CoercionUtil``): a literal converted as written (``'20'`` as a number), any other
    element CAST (STRUCTs of other fields rebuilt, see :func:`conform`)."""
    returned = call.returns
    if not isinstance(returned, ty.ArrayType):
        return sql.fn("array", *call.args)
    return sql.fn("array", *(conform(a, call.type(i), returned.element)
                             for i, a in enumerate(call.args)))


def _map(call: Call) -> exp.Expr:
    """MAP(k := v, ...), given as keys and values in turn: each key as the key type and each
    value as the value type (converted as ARRAY[...] converts its elements). As in ksqlDB's
    ``HashMap``, a later entry replaces an earlier one of the same key, and a NULL key is kept:
    for STRING keys as ``'null'`` (what ksqlDB's JSON writes for it; Spark's maps have no NULL
    keys), for others left out."""
    returned = call.returns
    if not isinstance(returned, ty.MapType) or len(call.args) % 2:
        raise UntranslatableError("MAP takes key := value pairs")
    keys = [conform(k, call.type(i), returned.key) for i, k in enumerate(call.args) if i % 2 == 0]
    values = [conform(v, call.type(i), returned.value) for i, v in enumerate(call.args) if i % 2]
    written = call.args[0::2]
    if all(isinstance(k, exp.Literal) for k in written) \
            and len({str(k.this) for k in written}) == len(written):  # distinct, none NULL
        return sql.fn("map", *(part for pair in zip(keys, values, strict=True) for part in pair))
    key, value = _entry("__e", "k"), _entry("__e", "v")
    entries = _keyed_entries(sql.fn("array", *(_pair(k, v) for k, v in zip(keys, values,
                                                                          strict=True))),
                            returned.key)
    others = sql.fn("map_filter", sql.var("__m"), sql.lam(
        exp.Not(this=sql.eq(sql.var("__k"), key.copy())), "__k", "__v"))
    put = sql.fn("map_concat", others, sql.fn("map", key, value))
    return sql.fn("aggregate", entries, sql.cast(sql.fn("map"), returned),
                  sql.lam(put, "__m", "__e"))


def _struct(call: Call) -> exp.Expr:
    fields: list[exp.Expr] = []
    for index, argument in enumerate(call.args):
        if isinstance(argument, exp.PropertyEQ):
            fields += [sql.lit(argument.this.name.upper()), argument.expression]
        elif isinstance(argument, exp.Alias):
            fields += [sql.lit(argument.alias), argument.this]
        else:
            fields += [sql.lit(f"F{index}"), argument]
    return sql.fn("named_struct", *fields)


def _builtin(name: str) -> Translation:
    def translate(call: Call) -> exp.Expr:
        return sql.fn(name, *call.args)
    return translate


def _entries_type(value: ty.SqlType) -> Signature:
    row = ty.StructType((("K", STRING), ("V", value)))
    return sig(MapOf(STRING, value), BOOLEAN, returns=ty.ArrayType(row))


def _constructed(_: Sequence[Argument], __: Bindings) -> ty.SqlType:
    raise AssertionError("constructors are typed by the typer")


_ARRAY = ArrayOf(T)

FUNCTIONS: tuple[FunctionSpec, ...] = (
    spec("ARRAY", Kind.SCALAR, [sig(T, returns=_constructed, variadic=True)], _array,
         variadic_any=True),
    spec("MAP", Kind.SCALAR, [sig(T, returns=_constructed, variadic=True)], _map,
         variadic_any=True),
    spec("STRUCT", Kind.SCALAR, [sig(T, returns=_constructed, variadic=True)], _struct,
         variadic_any=True),
    scalar("array_concat", sig(_ARRAY, _ARRAY, returns=_ARRAY),
           spark=_either_or_both("concat")),
    scalar("ARRAY_CONTAINS", sig(_ARRAY, T, returns=BOOLEAN),
           spark=lambda call: sql.fn("coalesce", sql.fn("array_contains", *call.args),
                                     sql.lit(False))),
    scalar("array_distinct", sig(_ARRAY, returns=_ARRAY), spark=_array_distinct),
    scalar("array_except", sig(_ARRAY, _ARRAY, returns=_ARRAY), spark=_builtin("array_except")),
    scalar("array_intersect", sig(_ARRAY, _ARRAY, returns=_ARRAY),
           spark=_builtin("array_intersect")),
    scalar("array_union", sig(_ARRAY, _ARRAY, returns=_ARRAY), spark=_builtin("array_union")),
    scalar("ARRAY_JOIN", sig(_ARRAY, returns=STRING), sig(_ARRAY, STRING, returns=STRING),
           spark=_array_join),
    scalar("ARRAY_LENGTH", sig(_ARRAY, returns=INTEGER), spark=_builtin("array_size")),
    scalar("array_max", sig(_ARRAY, returns=T), spark=_builtin("array_max")),
    scalar("array_min", sig(_ARRAY, returns=T), spark=_builtin("array_min")),
    scalar("array_remove", sig(_ARRAY, T, returns=_ARRAY), spark=_array_remove),
    scalar("array_sort", sig(_ARRAY, returns=_ARRAY), sig(_ARRAY, STRING, returns=_ARRAY),
           spark=_array_sort),
    scalar("slice", sig(_ARRAY, INTEGER, INTEGER, returns=_ARRAY), spark=_slice),
    scalar("AS_MAP", sig(ArrayOf(STRING), _ARRAY, returns=MapOf(STRING, T)), spark=_as_map),
    scalar("map_keys", sig(MapOf(STRING, T), returns=ArrayOf(STRING)),
           spark=_builtin("map_keys")),
    scalar("map_values", sig(MapOf(STRING, T), returns=_ARRAY), spark=_builtin("map_values")),
    scalar("map_union", sig(MapOf(STRING, T), MapOf(STRING, T), returns=MapOf(STRING, T)),
           spark=_map_union),
    scalar("ENTRIES", *(_entries_type(v) for v in (INTEGER, ty.BIGINT, ty.DOUBLE, BOOLEAN,
                                                   STRING)),
           spark=_entries),
    scalar("transform", sig(_ARRAY, LambdaOf((T,), U), returns=ArrayOf(U)),
           sig(MapOf(K, V), LambdaOf((K, V), T), LambdaOf((K, V), U), returns=MapOf(T, U)),
           spark=_transform),
    scalar("filter", sig(_ARRAY, LambdaOf((T,), BOOLEAN), returns=_ARRAY),
           sig(MapOf(K, V), LambdaOf((K, V), BOOLEAN), returns=MapOf(K, V)), spark=_filter),
    scalar("reduce", sig(_ARRAY, S, LambdaOf((S, T), S), returns=S),
           sig(MapOf(K, V), S, LambdaOf((S, K, V), S), returns=S), spark=_reduce),
)
