"""What SHOW FUNCTIONS and DESCRIBE FUNCTION say about the declared functions.

Only what :mod:`metastore.functions.library` declares is listed: each :class:`FunctionSpec` by
its name, its kind (ksqlDB's ``FunctionType``: SCALAR, AGGREGATE, TABLE) and the family it is
declared in as its category; its signatures are the variations of DESCRIBE FUNCTION, with the
parameter types as declared and the return type its rule gives. The registry keeps no
descriptions, authors or parameter names, so those are empty (ksqlDB's
``FunctionNameList`` / ``FunctionDescriptionList`` entities carry them).
"""

from __future__ import annotations

from typing import Any

from metastore.functions import (
    aggregates,
    collections,
    conditionals,
    datetime,
    json,
    maths,
    strings,
    tables,
    urls,
)
from metastore.functions import library as functions
from metastore.functions.registry import (
    ArrayOf,
    FunctionSpec,
    Kind,
    Param,
    Signature,
    array_of_first,
    first_argument,
)
from metastore.sql import types as ty

_CATEGORIES: tuple[tuple[tuple[FunctionSpec, ...], str], ...] = (
    (tuple(strings.FUNCTIONS), "STRING"), (tuple(maths.FUNCTIONS), "MATHEMATICAL"),
    (tuple(datetime.FUNCTIONS), "DATE / TIME"), (tuple(json.FUNCTIONS), "JSON"),
    (tuple(collections.FUNCTIONS), "COLLECTIONS"), (tuple(urls.FUNCTIONS), "URL"),
    (tuple(conditionals.FUNCTIONS), "CONDITIONAL"), (tuple(aggregates.FUNCTIONS), "AGGREGATE"),
    (tuple(tables.FUNCTIONS), "TABLE"),
)
"""ksqlDB's ``FunctionCategory`` names of the families the functions are declared in."""

_TYPES = {Kind.SCALAR: "SCALAR", Kind.AGGREGATE: "AGGREGATE", Kind.TABLE: "TABLE"}


def category(function: FunctionSpec) -> str:
    for family, name in _CATEGORIES:
        if any(function is member for member in family):
            return name
    return "OTHER"


def function_names() -> list[dict[str, Any]]:
    """ksqlDB's ``SimpleFunctionInfo`` of every declared name (aliases each under its own
    name, as ksqlDB registers them), by name."""
    listed = []
    for name in sorted(functions.names()):
        function = functions.lookup(name)
        assert function is not None
        listed.append({"name": name, "type": _TYPES[function.kind],
                       "category": category(function)})
    return listed


def describe(name: str) -> dict[str, Any]:
    """The fields of ksqlDB's ``FunctionDescriptionList`` for ``name`` (which must exist)."""
    function = functions.declared(name)
    return {"name": name.upper(), "description": "", "author": "", "version": "",
            "path": "internal", "type": _TYPES[function.kind],
            "functions": [_variation(signature) for signature in function.signatures]}


def _variation(signature: Signature) -> dict[str, Any]:
    """ksqlDB's ``FunctionInfo``: the arguments (a variadic one by its element type) and the
    return type."""
    count = len(signature.params)
    variadic_at = signature.repeated % count if signature.variadic and count else -1
    arguments = [{"name": "", "type": _param(param), "description": "",
                  "isVariadic": index == variadic_at}
                 for index, param in enumerate(signature.params)]
    return {"arguments": arguments, "returnType": _returns(signature), "description": ""}


def _param(param: Param) -> str:
    return param.sql()


def _returns(signature: Signature) -> str:
    returns = signature.returns
    if not callable(returns):
        return _param(returns)
    first = signature.params[0] if signature.params else None
    if returns is first_argument and first is not None:
        return _param(first)
    if returns is array_of_first and first is not None:
        return ArrayOf(first).sql()
    if all(isinstance(p, ty.SqlType) for p in signature.params):
        try:  # a rule over concrete parameters: what it gives for them
            return returns(list(signature.params), {}).sql()  # type: ignore[arg-type]
        except Exception:
            pass
    return "ANY"
