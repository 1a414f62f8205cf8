"""Table functions: EXPLODE and CUBE_EXPLODE, which turn one row into several.

Their types are declared; the planner cannot run table functions yet, so they have no Spark
translation and the runtime check refuses them with that reason.
"""

from __future__ import annotations

from metastore.functions.registry import ArrayOf, FunctionSpec, Kind, T, sig, spec

_NOT_YET = "table functions (one row in, several out) are not supported by the Spark runtime yet"

FUNCTIONS: tuple[FunctionSpec, ...] = (
    spec("explode", Kind.TABLE, [sig(ArrayOf(T), returns=T)], unsupported=_NOT_YET),
    spec("cube_explode", Kind.TABLE, [sig(ArrayOf(T), returns=ArrayOf(T))],
         unsupported=_NOT_YET),
)
