"""URL functions: URL_EXTRACT_* (parts of a URL, as ``java.net.URI`` reads them) and
URL_ENCODE_PARAM/URL_DECODE_PARAM (``application/x-www-form-urlencoded``)."""

from __future__ import annotations

from sqlglot import exp

from metastore.functions import sparksql as sql
from metastore.functions.registry import Call, FunctionSpec, Translation, scalar, sig
from metastore.sql import types as ty

STRING = ty.STRING


def _part(part: str) -> Translation:
    def translate(call: Call) -> exp.Expr:
        return sql.fn("parse_url", call.args[0], sql.lit(part), *call.args[1:])
    return translate


def _port(call: Call) -> exp.Expr:
    authority = sql.fn("parse_url", call.args[0], sql.lit("AUTHORITY"))
    port = sql.fn("regexp_extract", authority, sql.lit(":([0-9]+)$"), sql.lit(1))
    return sql.cast(sql.fn("nullif", port, sql.lit("")), ty.INTEGER)


FUNCTIONS: tuple[FunctionSpec, ...] = (
    scalar("url_extract_fragment", sig(STRING, returns=STRING), spark=_part("REF")),
    scalar("url_extract_host", sig(STRING, returns=STRING), spark=_part("HOST")),
    scalar("url_extract_parameter", sig(STRING, STRING, returns=STRING),
           spark=lambda call: sql.fn("url_decode", _part("QUERY")(call))),
    scalar("url_extract_path", sig(STRING, returns=STRING), spark=_part("PATH")),
    scalar("url_extract_port", sig(STRING, returns=ty.INTEGER), spark=_port),
    scalar("url_extract_protocol", sig(STRING, returns=STRING), spark=_part("PROTOCOL")),
    scalar("url_extract_query", sig(STRING, returns=STRING), spark=_part("QUERY")),
    scalar("url_decode_param", sig(STRING, returns=STRING),
           spark=lambda call: sql.fn("url_decode", *call.args)),
    scalar("url_encode_param", sig(STRING, returns=STRING),
           spark=lambda call: sql.fn("url_encode", *call.args)),
)
