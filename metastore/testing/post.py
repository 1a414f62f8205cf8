"""A test's post-conditions: the sources its statements must leave in the catalog.

ksqlDB's tests may list, under ``post.sources``, sources with their ``type`` (stream or table),
``schema`` (``K INT KEY, V STRING``), ``keyFormat`` and ``valueFormat``; each listed source must
exist and match. Schemas compare as ksqlDB's test runner compares them: INT is INTEGER, VARCHAR
is STRING, a table's PRIMARY KEY may be written KEY, and backticks and spacing do not matter.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from metastore.catalog.image import Image

_TYPE_WORDS = {"INT": "INTEGER", "VARCHAR": "STRING"}


def normalise_schema(text: str) -> str:
    text = text.replace("`", "").replace("PRIMARY KEY", "KEY")
    text = re.sub(r"DECIMAL\((\d+),\s*(\d+)\)", r"DECIMAL(\1,\2)", text)
    words = re.split(r"(\W)", text.upper())
    spaced = re.sub(r"\s+", " ", "".join(_TYPE_WORDS.get(w, w) for w in words)).strip()
    spaced = re.sub(r"\s*,\s*", ", ", spaced)  # a test may write "A INT,B INT"
    return re.sub(r"\s*([<>])\s*", r"\1", spaced)  # ksqlDB writes an empty STRUCT< >


def _format_name(value: Any) -> str | None:
    if isinstance(value, Mapping):
        value = value.get("format")
    return str(value).upper() if value is not None else None


def post_difference(post: Mapping[str, Any], image: Image) -> str | None:
    """Why the catalog ``image`` does not meet ``post``, or None when it does."""
    problems = []
    for expected in post.get("sources") or []:
        if not isinstance(expected, Mapping) or "name" not in expected:
            continue
        name = str(expected["name"])
        source = image.source(name) or image.source(name.upper())
        if source is None:
            problems.append(f"source {name} does not exist")
            continue
        kind = str(expected.get("type", source.kind.value)).upper()
        if kind != source.kind.value:
            problems.append(f"{name} is a {source.kind.value}, expected a {kind}")
        if "schema" in expected and normalise_schema(str(expected["schema"])) != (
                normalise_schema(source.schema_text())):
            problems.append(f"{name}'s schema is {source.schema_text()}, expected "
                            f"{expected['schema']}")
        for side, actual in (("keyFormat", source.key_format), ("valueFormat", source.value_format)):
            wanted = _format_name(expected.get(side))
            if wanted is not None and wanted != actual:
                problems.append(f"{name}'s {side} is {actual}, expected {wanted}")
    return "post-conditions not met: " + "; ".join(problems) if problems else None
