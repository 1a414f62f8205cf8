"""Conditional and null functions: IF, COALESCE, IFNULL, NULLIF, AS_VALUE (CASE and CAST are
syntax: the typer types them, Spark runs them as written)."""

from __future__ import annotations

from metastore.functions import sparksql as sql
from metastore.functions.registry import FunctionSpec, T, scalar, sig
from metastore.sql import types as ty

FUNCTIONS: tuple[FunctionSpec, ...] = (
    scalar("IF", sig(ty.BOOLEAN, T, T, returns=T), sig(ty.BOOLEAN, T, returns=T),
           spark=lambda call: sql.if_(call.args[0], call.args[1],
                                      call.args[2] if len(call.args) > 2 else sql.null())),
    scalar("COALESCE", sig(T, T, returns=T, variadic=True),
           spark=lambda call: sql.fn("coalesce", *call.args)),
    scalar("IFNULL", sig(T, T, returns=T), spark=lambda call: sql.fn("coalesce", *call.args)),
    scalar("NULLIF", sig(T, T, returns=T), spark=lambda call: sql.fn("nullif", *call.args)),
    scalar("AS_VALUE", sig(T, returns=T), spark=lambda call: call.args[0]),
)
