"""The command-record JSON parser gives exactly what the standard library gives, or its error."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as strat

from metastore.core import json_records
from metastore.log.record import CorruptRecordError, decode

_scalars = (strat.none() | strat.booleans() | strat.integers() | strat.text()
            | strat.floats(allow_nan=False, allow_infinity=False))
_values = strat.recursive(_scalars, lambda inner: strat.lists(inner, max_size=4)
                          | strat.dictionaries(strat.text(), inner, max_size=4), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(_values)
def test_any_document_parses_as_the_standard_library_parses_it(value: Any) -> None:
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False)):
        ours, theirs = json_records.loads(text.encode()), json.loads(text.encode())
        assert repr(ours) == repr(theirs), "the same values, types, signs and key order"


@pytest.mark.parametrize("document", [
    b'{"a": NaN, "b": Infinity, "c": -Infinity}',  # orjson refuses these
    b'{"big": 123456789012345678901234567890}',  # beyond 64 bits: orjson makes it a float
    b'[18446744073709551616, -9223372036854775809, 0.1000000000000000055511151231257827]',
    b'[-0, -0.0, 1e400, -1e400, 1e-400, 2.2250738585072011e-308, 1.7976931348623157e308, 1E5]',
    b'{"b": 1, "a": 2, "b": 3}',  # the last value, at the first name's place
    b'{"lone": "\\ud800"}',  # a lone surrogate
    b'{"a": 1, "a": 2}',  # the last name wins
    '{"utf16": "\u00e9"}'.encode("utf-16"),
    b'\xef\xbb\xbf{"bom": 1}',
    b"[" * 2000 + b"]" * 2000,  # deeper than orjson's limit
])
def test_documents_orjson_refuses_or_reads_its_own_way_parse_as_before(document: bytes) -> None:
    ours, theirs = json_records.loads(document), json.loads(document)
    assert repr(ours) == repr(theirs)  # repr: NaN != NaN
    if isinstance(theirs, dict) and "a" in theirs and isinstance(theirs["a"], float):
        assert math.isnan(ours["a"])


@pytest.mark.parametrize("document", [b"", b"{", b'{"a": 1,}', b"\xff\xfe\x00", b'"\xc3\x28"'])
def test_what_neither_parses_raises_what_the_standard_library_raises(document: bytes) -> None:
    with pytest.raises((ValueError, UnicodeDecodeError)) as ours:
        json_records.loads(document)
    with pytest.raises((ValueError, UnicodeDecodeError)) as theirs:
        json.loads(document)
    assert type(ours.value) is type(theirs.value)


def test_a_record_nested_past_the_interpreter_stack_is_corrupt_not_a_crash() -> None:
    with pytest.raises(CorruptRecordError, match="nested too deeply"):
        decode(b'{"version": 1, "command": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 7)
