"""ksqlDB's check that an aggregation's state can be stored (its ``MaterializationUtil``).

ksqlDB keeps each aggregate's intermediate value (an AVG's running sum and count, a TOPK's
array; :attr:`~metastore.functions.registry.FunctionSpec.intermediate`) in a state store
serialized with the value format of the query's leftmost source. When that format cannot hold
an intermediate type (DELIMITED has no ARRAY, MAP or STRUCT), the query is refused when its
aggregation is built: after the query is planned, before its sink's formats are checked.
"""

from __future__ import annotations

from sqlglot import exp

from metastore.catalog.exceptions import FormatError
from metastore.engine.analysis import Analysis
from metastore.formats import rules as formats
from metastore.functions import library as functions

MESSAGE = ("One of the functions used in the statement has an intermediate type that the value "
           "format can not handle. Please remove the function or change the format.\nConsider "
           "up-voting https://github.com/confluentinc/ksql/issues/3950, which will resolve this "
           "limitation")


def check_intermediate_types(analysis: Analysis) -> None:
    """Raise ksqlDB's error when the value format of ``analysis``'s leftmost source cannot hold
    the intermediate type of one of its aggregate calls."""
    if not analysis.aggregate or not analysis.reads:
        return
    fmt = formats.lookup(analysis.reads[0].source.value_format)
    if fmt is None:
        return
    select = analysis.query.select
    having = select.args.get("having")
    for root in [*select.expressions, *([having] if having is not None else [])]:
        for node in root.find_all(exp.Anonymous):
            intermediate = functions.intermediate_type(node)
            if intermediate is not None and fmt.unsupported_reason(intermediate) is not None:
                raise FormatError(MESSAGE)
