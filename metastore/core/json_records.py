"""Parsing the JSON of command records and checkpoints: fast, and exactly as the standard library.

Replay parses one JSON document per command record, and the standard library's parser is most of
the cost of a replay. :func:`loads` parses with orjson (several times faster) and falls back to
:func:`json.loads` for every document orjson refuses: NaN and infinities, integers beyond 64 bits,
lone surrogates, other encodings than UTF-8, nesting deeper than orjson's limit. orjson reads an
integer beyond 64 bits as a float where the standard library keeps it exact, so a document with 19
digits in a row (in a number or a string alike) goes to the standard library without asking orjson.
Otherwise a document both accept parses to the same value (for duplicate names the last one wins in
both), so a node with this parser replays every log as a node without it did, and raises what
``json.loads`` raises on a document neither accepts.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_LONG_DIGIT_RUN = b"0" * 19


def loads(document: bytes) -> Any:
    if _LONG_DIGIT_RUN in document.translate(_DIGITS_AS_ZERO):  # bytes in C, unlike a regex
        return json.loads(document)
    try:
        return orjson.loads(document)
    except orjson.JSONDecodeError:
        return json.loads(document)
