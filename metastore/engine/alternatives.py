"""The hint ksqlDB adds when a statement names a source that does not exist but one whose name
differs only in case does (``MetaStoreImpl.checkAlternatives``): the name was probably meant
quoted, or meant unquoted.
"""

from __future__ import annotations

from collections.abc import Iterable

from metastore.catalog.model import DataSource
from metastore.sql.statements import SourceKind


def hint(name: str, sources: Iterable[DataSource], kind: SourceKind | None = None) -> str:
    """``"\\nDid you mean ...? Hint: ..."`` for the sources named ``name`` but for case (of
    ``kind``, if given), else ``""``."""
    matched = sorted((s for s in sources if s.name.upper() == name.upper()
                      and (kind is None or s.kind is kind)), key=lambda s: s.name)
    if not matched:
        return ""
    if len(matched) > 1:
        listed = [f'"{s.name}" ({s.kind.value})' for s in matched]
        joined = (" or ".join(listed) if len(listed) == 2
                  else ", ".join(listed[:-1]) + ", or " + listed[-1])
        return (f"\nDid you mean {joined}? Hint: wrap the source name in double quotes to make it "
                "case-sensitive.")
    found = matched[0].name
    if any(c.islower() for c in found):
        return (f'\nDid you mean "{found}"? Hint: wrap the source name in double quotes to make '
                "it case-sensitive.")
    return f"\nDid you mean {found}? Hint: try removing double quotes from the source name."
