"""String and bytes functions: ksqlDB's UCASE, SUBSTRING, CONCAT, LPAD, MASK, REGEXP_*, ...

ksqlDB's string functions return NULL on a NULL input, count positions from 1 (negative ones from
the end) and, unlike Spark, CONCAT skips NULLs and TRIM removes every character up to U+0020
(Java's ``String.trim``); the translations below bridge each such difference.
"""

from __future__ import annotations

from sqlglot import exp

from metastore.core.limits import MAX_PADDED_CHARS
from metastore.functions import bounds
from metastore.functions import sparksql as sql
from metastore.functions.registry import (
    Call,
    FunctionSpec,
    Translation,
    UntranslatableError,
    literal_int,
    literal_text,
    scalar,
    sig,
)
from metastore.sql import types as ty

STRING, BYTES, INTEGER = ty.STRING, ty.BYTES, ty.INTEGER


def _quoted(pattern: exp.Expr) -> exp.Expr:
    """A regular expression matching ``pattern`` literally, as Java's ``Pattern.quote`` writes
    it (a ``\\E`` in the pattern closed and reopened)."""
    escaped = sql.fn("replace", pattern, sql.lit("\\E"), sql.lit("\\E\\\\E\\Q"))
    return sql.fn("concat", sql.lit("\\Q"), escaped, sql.lit("\\E"))


def _substring(call: Call) -> exp.Expr:
    text, position, *length = call.args
    literal = literal_int(position)
    if literal is None or literal < 0:
        # ksqlDB clamps a negative position to the start; Spark would shorten the length instead
        position = sql.if_(sql.lt(position, sql.lit(0)),
                           sql.fn("greatest", position, exp.Neg(this=sql.fn("length", text))),
                           position)
    return sql.fn("substring", text, position, *length)


def _concat(call: Call) -> exp.Expr:
    if call.returns == BYTES:
        empty = sql.fn("unhex", sql.lit(""))
        return sql.fn("concat", *(sql.fn("coalesce", a, empty) for a in call.args))
    return sql.fn("concat_ws", sql.lit(""), *call.args)


def _as_text(data: exp.Expr) -> exp.Expr:
    """BYTES as text of one character per byte (ISO-8859-1), for the string functions to work
    on byte by byte; :func:`_as_bytes` turns it back."""
    return sql.fn("decode", data, sql.lit("ISO-8859-1"))


def _as_bytes(text: exp.Expr) -> exp.Expr:
    return sql.fn("encode", text, sql.lit("ISO-8859-1"))


def _concat_ws(call: Call) -> exp.Expr:
    if call.returns == BYTES:
        return _as_bytes(sql.fn("concat_ws", *(_as_text(a) for a in call.args)))
    return sql.fn("concat_ws", *call.args)


def _pad(spark_function: str) -> Translation:
    def translate(call: Call) -> exp.Expr:
        text, length, padding = call.args
        empty = sql.eq(sql.fn("length", padding), sql.lit(0))
        invalid = exp.Or(this=empty, expression=sql.lt(length, sql.lit(0)))
        return sql.if_(invalid, sql.null(), sql.fn(spark_function, text, length, padding))
    return translate


def _instr(call: Call) -> exp.Expr:
    """ksqlDB's INSTR(text, sub[, position[, occurrence]]): the 1-based position of the
    occurrence-th ``sub`` (occurrences may overlap) found from ``position``, or 0. A negative
    position searches backwards from that many characters before the end; a position past
    either end, 0, or an occurrence below 1 give 0; a NULL text or sub gives 0."""
    text, substring, *rest = call.args
    position = rest[0] if rest else sql.lit(1)
    occurrence = rest[1] if len(rest) > 1 else sql.lit(1)
    fixed_position, fixed_occurrence = literal_int(position), literal_int(occurrence)
    size = sql.fn("length", text)
    if fixed_position is not None and fixed_position >= 1 and fixed_occurrence == 1:
        found = sql.fn("coalesce", sql.fn("locate", substring, text, position), sql.lit(0))
        if fixed_position == 1:
            return found
        return sql.if_(sql.lt(size, position), sql.lit(0), found)
    backwards = sql.lt(position, sql.lit(0))
    start = sql.fn("abs", position)
    searched = sql.if_(backwards, sql.fn("reverse", text), text.copy())
    sought = sql.if_(backwards.copy(), sql.fn("reverse", substring), substring.copy())
    at, k = sql.var("__at"), sql.var("__k")
    # the occurrence-th match from ``start``, each search starting just after the last match
    # (an empty ``sub`` matches right at ``start``); then its position in ``text``
    step = sql.case(
        (sql.eq(sql.fn("length", substring.copy()), sql.lit(0)), start.copy()),
        (sql.eq(k, sql.lit(1)), sql.fn("locate", sought, searched, start.copy())),
        (sql.eq(at.copy(), sql.lit(0)), sql.lit(0)),
        otherwise=sql.fn("locate", sought.copy(), searched.copy(), sql.add(at.copy(),
                                                                           sql.lit(1))))
    placed = sql.case(
        (sql.eq(at.copy(), sql.lit(0)), sql.lit(0)),
        (backwards.copy(), sql.add(sql.sub(sql.sub(size.copy(), at.copy()),
                                           sql.fn("length", substring.copy())), sql.lit(2))),
        otherwise=at.copy())
    # bounded by the text's length, so a huge literal occurrence is no huge constant array
    steps = sql.fn("least", occurrence, sql.add(size.copy(), sql.lit(1)))
    located = sql.fn("aggregate", sql.fn("sequence", sql.lit(1), steps), sql.lit(0),
                     sql.lam(step, "__at", "__k"), sql.lam(placed, "__at"))
    invalid = exp.Or(this=exp.Or(this=sql.lt(size.copy(), start.copy()),
                                 expression=sql.eq(position.copy(), sql.lit(0))),
                     expression=exp.Or(this=sql.lt(occurrence.copy(), sql.lit(1)),
                                       expression=sql.lt(sql.add(size.copy(), sql.lit(1)),
                                                         occurrence.copy())))
    return sql.case(
        (sql.any_null(text.copy(), substring.copy()), sql.lit(0)),
        (sql.any_null(position.copy(), occurrence.copy()), sql.null()),
        (invalid, sql.lit(0)),
        otherwise=located)


_DEFAULT_MASKS = ("X", "x", "n", "-")


def _mask_chars(call: Call, first: int) -> list[exp.Expr]:
    given = list(call.args[first:first + 4])
    return given or [sql.lit(c) for c in _DEFAULT_MASKS]


def _mask(call: Call) -> exp.Expr:
    return sql.fn("mask", call.args[0], *_mask_chars(call, 1))


def _mask_part(masked_side: str, keep: bool) -> Translation:
    """MASK_LEFT/RIGHT mask n characters of one side; MASK_KEEP_LEFT/RIGHT mask all but them."""

    def translate(call: Call) -> exp.Expr:
        text, count = call.args[0], call.args[1]
        masks = _mask_chars(call, 2)
        size = sql.fn("length", text)
        # characters [1, split] form the left part, the rest the right part
        if masked_side == "left":
            split = sql.fn("least", count, size)
        else:
            split = sql.fn("greatest", sql.sub(size, count), sql.lit(0))
        left = sql.fn("substring", text, sql.lit(1), split)
        right = sql.fn("substring", text, sql.add(split, sql.lit(1)))
        mask_left = (masked_side == "left") != keep
        parts = ([sql.fn("mask", left, *masks), right] if mask_left
                 else [left, sql.fn("mask", right, *masks)])
        return sql.if_(sql.lt(count, sql.lit(0)), sql.null(), sql.fn("concat", *parts))
    return translate


def _regexp_extract(call: Call) -> exp.Expr:
    pattern, text, *group = call.args
    index = group[0] if group else sql.lit(0)
    no_match = sql.eq(sql.fn("regexp_instr", text, pattern), sql.lit(0))
    return sql.if_(no_match, sql.null(), sql.fn("regexp_extract", text, pattern, index))


def _regexp_extract_all(call: Call) -> exp.Expr:
    pattern, text, *group = call.args
    return sql.fn("regexp_extract_all", text, pattern, group[0] if group else sql.lit(0))


def _split(call: Call) -> exp.Expr:
    text, delimiter = call.args
    if call.returns == ty.ArrayType(BYTES):  # split byte by byte, each part bytes again
        parts = _split_text(_as_text(text), _as_text(delimiter))
        return sql.fn("transform", parts, sql.lam(_as_bytes(sql.var("__p")), "__p"))
    return _split_text(text, delimiter)


def _split_text(text: exp.Expr, delimiter: exp.Expr) -> exp.Expr:
    return sql.if_(sql.eq(delimiter, sql.lit("")), sql.fn("split", text, sql.lit("(?!\\z)")),
                   sql.fn("split", text.copy(), _quoted(delimiter.copy()), sql.lit(-1)))


def _trim(call: Call) -> exp.Expr:
    return sql.fn("regexp_replace", call.args[0], sql.lit("^[\\x00-\\x20]+|[\\x00-\\x20]+$"),
                  sql.lit(""))


def _chr(call: Call) -> exp.Expr:
    code = call.args[0]
    if call.type(0) == STRING:
        escaped = exp.RegexpLike(this=code, expression=sql.lit("^(\\\\u[0-9a-fA-F]{4})+$"))
        unescaped = sql.fn("java_method", sql.lit("org.apache.commons.text.StringEscapeUtils"),
                           sql.lit("unescapeJava"), code)
        return sql.if_(escaped, unescaped, sql.null())
    # a code point outside Unicode's range is NULL, as ksqlDB's isValidCodePoint check has it
    valid = exp.Between(this=code, low=sql.lit(0), high=sql.lit(0x10FFFF))
    return sql.if_(valid, sql.fn("java_method", sql.lit("java.lang.Character"),
                                 sql.lit("toString"), sql.cast(code.copy(), INTEGER)), sql.null())


def _field(call: Call) -> exp.Expr:
    text, *candidates = call.args
    position = sql.fn("array_position", sql.fn("array", *candidates), text)
    return sql.fn("coalesce", sql.cast(position, INTEGER), sql.lit(0))


_ENCODINGS = {"UTF8": "UTF-8", "ASCII": "US-ASCII"}


def _from_bytes(call: Call) -> exp.Expr:
    value, encoding = call.args
    name = (literal_text(encoding) or "").upper()
    if name == "HEX":
        return sql.fn("hex", value)
    if name == "BASE64":
        return sql.fn("base64", value)
    if name in _ENCODINGS:
        return sql.fn("decode", value, sql.lit(_ENCODINGS[name]))
    raise UntranslatableError("FROM_BYTES needs a literal encoding: 'hex', 'utf8', 'ascii' or 'base64'")


def _to_bytes(call: Call) -> exp.Expr:
    value, encoding = call.args
    name = (literal_text(encoding) or "").upper()
    if name == "HEX":
        return sql.fn("unhex", value)
    if name == "BASE64":
        return sql.fn("unbase64", value)
    if name in _ENCODINGS:
        return sql.fn("encode", value, sql.lit(_ENCODINGS[name]))
    raise UntranslatableError("TO_BYTES needs a literal encoding: 'hex', 'utf8', 'ascii' or 'base64'")


_TEXT_ENCODINGS = ("hex", "utf8", "ascii", "base64")


def _hex_digits(text: exp.Expr) -> exp.Expr:
    """ksqlDB's ``hexStrip``: ``0x...`` loses its prefix (a ``0`` added to an odd count of
    digits), ``X'...'`` its quotes; what remains must be pairs of hex digits (else NULL)."""
    stripped = sql.case(
        (exp.RegexpLike(this=text, expression=sql.lit("^0x[\\s\\S]*$")),
         sql.if_(sql.eq(exp.Mod(this=sql.fn("length", text.copy()), expression=sql.lit(2)),
                       sql.lit(1)),
                 sql.fn("concat", sql.lit("0"), sql.fn("substring", text.copy(), sql.lit(3))),
                 sql.fn("substring", text.copy(), sql.lit(3)))),
        (exp.RegexpLike(this=text.copy(), expression=sql.lit("^[xX]'[\\s\\S]*'$")),
         sql.fn("substring", text.copy(), sql.lit(3), sql.sub(sql.fn("length", text.copy()),
                                                           sql.lit(3)))),
        otherwise=text.copy())
    return sql.if_(exp.RegexpLike(this=stripped, expression=sql.lit("^([0-9a-fA-F]{2})*$")),
                   sql.fn("unhex", stripped.copy()), sql.cast(sql.null(), ty.BYTES))


def _text_bytes(text: exp.Expr, encoding: str) -> exp.Expr:
    """The bytes ``text`` stands for in ENCODE's input ``encoding``."""
    if encoding == "hex":
        return _hex_digits(text)
    if encoding == "base64":  # commons-codec: lenient, either alphabet, padding optional
        return sql.fn("unbase64", sql.fn("translate", text, sql.lit("-_"), sql.lit("+/")))
    if encoding == "ascii":  # Java's getBytes(US_ASCII): '?' for any other character
        text = sql.fn("regexp_replace", text, sql.lit("[^\\x{0}-\\x{7F}]"), sql.lit("?"))
    return sql.cast(text, ty.BYTES)


def _bytes_text(data: exp.Expr, encoding: str) -> exp.Expr:
    """Bytes written in ENCODE's output ``encoding``, as Java decodes them (U+FFFD for what is
    no character of the charset)."""
    if encoding == "hex":
        return sql.fn("lower", sql.fn("hex", data))
    if encoding == "base64":
        return sql.fn("base64", data)
    if encoding == "ascii":
        latin = sql.fn("decode", data, sql.lit("ISO-8859-1"))
        return sql.fn("regexp_replace", latin, sql.lit("[\\x{80}-\\x{FF}]"), sql.lit("\ufffd"))
    return sql.fn("make_valid_utf8", sql.cast(data, STRING))


def _encode(call: Call) -> exp.Expr:
    """ENCODE(text, from, to) between hex, utf8, ascii and base64 (any case). What ksqlDB fails
    on (an unknown or twice the same encoding, malformed hex) is NULL."""
    text, source, target = call.args
    pairs = [(a, b) for a in _TEXT_ENCODINGS for b in _TEXT_ENCODINGS if a != b]
    fixed_source, fixed_target = literal_text(source), literal_text(target)
    if fixed_source is not None and fixed_target is not None:
        pair = (fixed_source.lower(), fixed_target.lower())
        if pair not in pairs:
            return sql.cast(sql.null(), STRING)
        return _bytes_text(_text_bytes(text, pair[0]), pair[1])
    chosen = sql.fn("concat", sql.fn("lower", source), sql.lit("/"), sql.fn("lower", target))
    return sql.case(*((sql.eq(chosen.copy(), sql.lit(f"{a}/{b}")),
                       _bytes_text(_text_bytes(text.copy(), a), b)) for a, b in pairs),
                    otherwise=sql.cast(sql.null(), STRING))


def _number_from_bytes(size: int, result: ty.SqlType) -> Translation:
    """INT/BIGINT/DOUBLE_FROM_BYTES: exactly ``size`` bytes, BIG_ENDIAN unless told
    LITTLE_ENDIAN (NULL for another length, where ksqlDB fails)."""

    def translate(call: Call) -> exp.Expr:
        value, *order = call.args
        digits = sql.fn("hex", value)
        if order:
            name = literal_text(order[0])
            if name is None or name.upper() not in ("BIG_ENDIAN", "LITTLE_ENDIAN"):
                raise UntranslatableError("the byte order must be a literal 'BIG_ENDIAN' or "
                                          "'LITTLE_ENDIAN'")
            if name.upper() == "LITTLE_ENDIAN":
                pairs = sql.fn("regexp_extract_all", digits, sql.lit("(..)"), sql.lit(1))
                digits = sql.fn("array_join", sql.fn("reverse", pairs), sql.lit(""))
        bits = sql.cast(sql.fn("conv", digits, sql.lit(16), sql.lit(-10)), ty.BIGINT)
        if result == ty.DOUBLE:
            number = sql.cast(sql.fn("java_method", sql.lit("java.lang.Double"),
                                     sql.lit("longBitsToDouble"), bits), ty.DOUBLE)
        else:
            number = sql.cast(bits, result)
        return sql.if_(sql.eq(sql.fn("length", value.copy()), sql.lit(size)), number, sql.null())
    return translate


def _literal(delimiter: exp.Expr) -> exp.Expr:
    """A regular expression matching ``delimiter`` as written."""
    return sql.fn("concat", sql.lit("\\Q"), delimiter, sql.lit("\\E"))


def _split_to_map(call: Call) -> exp.Expr:
    """Entries split on the entry delimiter (empty ones skipped), those holding the key-value
    delimiter split on it (key, value: the first two parts); of repeated keys the last wins.
    NULL when a delimiter is empty or both are the same."""
    text, entry_delimiter, pair_delimiter = call.args
    entries = sql.fn("filter", sql.fn("split", text, _literal(entry_delimiter), sql.lit(-1)),
                     sql.lam(exp.And(this=sql.binary(exp.NEQ, sql.var("__s"), sql.lit("")),
                                     expression=sql.binary(exp.GT, sql.fn(
                                         "instr", sql.var("__s"), pair_delimiter.copy()),
                                         sql.lit(0))), "__s"))
    parts = sql.fn("split", sql.var("__s"), _literal(pair_delimiter.copy()), sql.lit(-1))
    pair = sql.fn("named_struct", sql.lit("k"), sql.fn("element_at", parts, sql.lit(1)),
                  sql.lit("v"), sql.fn("element_at", parts.copy(), sql.lit(2)))
    pairs = sql.fn("transform", entries, sql.lam(pair, "__s"))
    key = exp.Dot(this=sql.var("__p"), expression=exp.to_identifier("k"))
    later = sql.fn("slice", pairs.copy(), sql.add(sql.var("__i"), sql.lit(2)),
                   sql.fn("size", pairs.copy()))
    repeated = sql.fn("exists", later, sql.lam(
        sql.eq(exp.Dot(this=sql.var("__q"), expression=exp.to_identifier("k")), key), "__q"))
    unique = sql.fn("filter", pairs,
                    sql.lam(exp.Not(this=exp.Paren(this=repeated)), "__p", "__i"))
    invalid = exp.Or(this=exp.Or(this=sql.eq(entry_delimiter.copy(), sql.lit("")),
                                 expression=sql.eq(pair_delimiter.copy(), sql.lit(""))),
                     expression=sql.eq(entry_delimiter.copy(), pair_delimiter.copy()))
    return sql.if_(invalid, sql.null(), sql.fn("map_from_entries", unique))


def _builtin(name: str) -> Translation:
    def translate(call: Call) -> exp.Expr:
        return sql.fn(name, *call.args)
    return translate


def _uuid(call: Call) -> exp.Expr:
    if call.args:
        raise UntranslatableError("UUID of BYTES has no Spark translation yet")
    return sql.fn("uuid")


_MASKED = (STRING, INTEGER, STRING, STRING, STRING, STRING)

FUNCTIONS: tuple[FunctionSpec, ...] = (
    scalar(("ucase", "UPPER"), sig(STRING, returns=STRING), spark=_builtin("upper")),
    scalar(("lcase", "LOWER"), sig(STRING, returns=STRING), spark=_builtin("lower")),
    scalar(("len", "LENGTH"), sig(STRING, returns=INTEGER), sig(BYTES, returns=INTEGER),
           spark=_builtin("length")),
    scalar("trim", sig(STRING, returns=STRING), spark=_trim),
    scalar(("substring", "SUBSTR"), sig(STRING, INTEGER, returns=STRING),
           sig(STRING, INTEGER, INTEGER, returns=STRING), sig(BYTES, INTEGER, returns=BYTES),
           sig(BYTES, INTEGER, INTEGER, returns=BYTES), spark=_substring),
    scalar("concat", sig(STRING, returns=STRING, variadic=True),
           sig(BYTES, returns=BYTES, variadic=True), spark=_concat),
    scalar("concat_ws", sig(STRING, returns=STRING, variadic=True),
           sig(BYTES, returns=BYTES, variadic=True), spark=_concat_ws),
    scalar("LPad", sig(STRING, INTEGER, STRING, returns=STRING),
           sig(BYTES, INTEGER, BYTES, returns=BYTES), spark=bounds.padded(_pad("lpad"), MAX_PADDED_CHARS)),
    scalar("RPad", sig(STRING, INTEGER, STRING, returns=STRING),
           sig(BYTES, INTEGER, BYTES, returns=BYTES), spark=bounds.padded(_pad("rpad"), MAX_PADDED_CHARS)),
    scalar("initcap", sig(STRING, returns=STRING), spark=_builtin("initcap")),
    scalar("instr", sig(STRING, STRING, returns=INTEGER),
           sig(STRING, STRING, INTEGER, returns=INTEGER),
           sig(STRING, STRING, INTEGER, INTEGER, returns=INTEGER), spark=_instr),
    scalar("mask", sig(STRING, returns=STRING),
           sig(STRING, STRING, STRING, STRING, STRING, returns=STRING), spark=_mask),
    *(scalar(name, sig(STRING, INTEGER, returns=STRING), sig(*_MASKED, returns=STRING),
             spark=_mask_part(side, keep))
      for name, side, keep in (("mask_left", "left", False), ("mask_right", "right", False),
                               ("mask_keep_left", "left", True),
                               ("mask_keep_right", "right", True))),
    scalar("md5", sig(STRING, returns=STRING), spark=_builtin("md5")),
    scalar("replace", sig(STRING, STRING, STRING, returns=STRING), spark=_builtin("replace")),
    scalar("regexp_extract", sig(STRING, STRING, returns=STRING),
           sig(STRING, STRING, INTEGER, returns=STRING), spark=_regexp_extract),
    scalar("regexp_extract_all", sig(STRING, STRING, returns=ty.ArrayType(STRING)),
           sig(STRING, STRING, INTEGER, returns=ty.ArrayType(STRING)),
           spark=_regexp_extract_all),
    scalar("regexp_replace", sig(STRING, STRING, STRING, returns=STRING),
           spark=_builtin("regexp_replace")),
    scalar("regexp_split_to_array", sig(STRING, STRING, returns=ty.ArrayType(STRING)),
           spark=lambda call: sql.fn("split", *call.args, sql.lit(-1))),
    scalar("split", sig(STRING, STRING, returns=ty.ArrayType(STRING)),
           sig(BYTES, BYTES, returns=ty.ArrayType(BYTES)), spark=_split),
    scalar("split_to_map", sig(STRING, STRING, STRING, returns=ty.MapType(STRING, STRING)),
           spark=_split_to_map, null_if_null=(0, 1, 2)),
    scalar("Chr", sig(INTEGER, returns=STRING), sig(STRING, returns=STRING), spark=_chr),
    scalar("elt", sig(INTEGER, STRING, returns=STRING, variadic=True), spark=_builtin("elt")),
    scalar("field", sig(STRING, STRING, returns=INTEGER, variadic=True), spark=_field),
    scalar("encode", sig(STRING, STRING, STRING, returns=STRING), spark=_encode,
           null_if_null=(0, 1, 2), raises=True),
    scalar("from_bytes", sig(BYTES, STRING, returns=STRING), spark=_from_bytes),
    scalar("to_bytes", sig(STRING, STRING, returns=BYTES), spark=_to_bytes, raises=True),
    *(scalar(name, sig(BYTES, returns=result), sig(BYTES, STRING, returns=result),
             spark=_number_from_bytes(size, result), raises=True)
      for name, size, result in (("int_from_bytes", 4, INTEGER),
                                 ("bigint_from_bytes", 8, ty.BIGINT),
                                 ("double_from_bytes", 8, ty.DOUBLE))),
    scalar("UUID", sig(returns=STRING), sig(BYTES, returns=STRING),
           spark=_uuid),
)
