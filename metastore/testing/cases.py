"""Query tests as ksqlDB writes them, loaded from its three file shapes.

- a ksqlDB test file: ``{"tests": [{"name", "statements", "inputs", "outputs", ...}]}``;
- JSON Lines, one test a line (each may carry an ``id``), gzipped when the file ends ``.gz``;
- ksql-test-runner's trio: a SQL file plus ``{"inputs": [...]}`` and ``{"outputs": [...]}``.

A record is ``{topic, key, value, timestamp?, headers?, window?}``; ``value`` is a JSON value (a
string for DELIMITED and KAFKA strings), ``null`` for a tombstone. Loading checks the shape only;
what the statements mean is the runner's business.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metastore.core.exceptions import MetastoreError


class CaseFileError(MetastoreError):
    """A test file that cannot be read or is not in one of ksqlDB's test shapes."""


@dataclass(frozen=True)
class Window:
    start: int
    end: int
    kind: str


@dataclass(frozen=True)
class CaseRecord:
    topic: str
    key: Any
    value: Any
    timestamp: int | None = None
    headers: tuple[tuple[str, bytes | None], ...] | None = None
    window: Window | None = None


@dataclass(frozen=True)
class DeclaredTopic:
    name: str
    partitions: int | None = None
    """As the test declares it; None when it does not say (ksqlDB's driver then makes 1)."""
    key_schema: Any = None
    value_schema: Any = None
    """The registry schemas the test's records on the topic are written with (an Avro schema
    as JSON; None: the one derived from the columns of the source on the topic)."""
    key_format: str | None = None
    value_format: str | None = None
    key_schema_id: int | None = None
    value_schema_id: int | None = None
    """The ids the test's statements know its schemas by (its registry's, which starts empty)."""
    key_schema_references: tuple[SchemaImport, ...] = ()
    value_schema_references: tuple[SchemaImport, ...] = ()
    """The schemas the declared schemas import, registered under their names first."""


@dataclass(frozen=True)
class SchemaImport:
    """A schema a test's declared schema references (``valueSchemaReferences``): the name it
    imports it by, its format and its text (an Avro or JSON schema as JSON)."""

    name: str
    format: str
    schema: Any


@dataclass(frozen=True)
class QueryTest:
    test_id: str
    name: str
    statements: tuple[str, ...]
    inputs: tuple[CaseRecord, ...]
    outputs: tuple[CaseRecord, ...]
    topics: tuple[DeclaredTopic, ...] = ()
    properties: Mapping[str, Any] = field(default_factory=dict)
    expected_error: Mapping[str, Any] | None = None
    post: Mapping[str, Any] = field(default_factory=dict)
    """Post-conditions: ``{"sources": [{name, type, schema, keyFormat, valueFormat}]}``."""
    plans: tuple[str, ...] | None = None
    """Stored plans (``"plans"``, the project's own field): the plan document each persistent
    query runs, in the order created, on topics named ``qtt-planned-`` + the test's topic; the
    runner runs them instead of planning, as a node runs the plans its commands keep."""

    @property
    def script(self) -> str:
        return "\n".join(s if s.rstrip().endswith(";") else s + ";" for s in self.statements)


def load(paths: Sequence[Path]) -> list[QueryTest]:
    """Every test in ``paths`` (ksqlDB test files or JSON Lines), in file order."""
    tests: list[QueryTest] = []
    for path in paths:
        tests.extend(_load_file(path))
    return tests


def from_json(raw: Any, where: str) -> QueryTest:
    """One test from its JSON object (a line of a JSON Lines file); ``where`` names it in
    errors and, without an ``id``, in its id."""
    return _test(raw, where)


def load_runner_files(sql_file: Path, input_file: Path | None, output_file: Path | None
                      ) -> QueryTest:
    """One test from ksql-test-runner's files: statements, inputs and expected outputs."""
    statements = tuple(s for s in _read(sql_file).split(";") if s.strip())
    inputs = _json(input_file).get("inputs", []) if input_file is not None else []
    outputs = _json(output_file).get("outputs", []) if output_file is not None else []
    return _test({"name": sql_file.stem, "statements": list(statements), "inputs": inputs,
                  "outputs": outputs}, str(sql_file))


def _load_file(path: Path) -> Iterator[QueryTest]:
    text = _read(path)
    stripped = text.lstrip()
    if stripped.startswith("{") and not _is_json_lines(stripped):
        document = _parse(text, str(path))
        if not isinstance(document, dict) or not isinstance(document.get("tests"), list):
            raise CaseFileError(f"{path}: expected an object with a \"tests\" list")
        for raw in document["tests"]:
            if _disabled(raw):
                continue
            for variant in _format_variants(raw):
                for configured in _config_variants(variant):
                    yield _test(configured, str(path))
        return
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            raw = _parse(line, f"{path}:{number}")
            if not _disabled(raw):
                yield _test(raw, str(path))


def _disabled(raw: Any) -> bool:
    """A test ksqlDB's driver skips: ``"enabled": false``."""
    return isinstance(raw, dict) and raw.get("enabled") is False


def _format_variants(raw: Any) -> list[Any]:
    """A ksqlDB test with ``"format": [...]`` is one test per format, ``{FORMAT}`` replaced in its
    statements and `` - FORMAT`` appended to its name, as ksqlDB's test loader expands it."""
    formats = raw.get("format") if isinstance(raw, dict) else None
    if not isinstance(formats, list) or not formats:
        return [raw]
    variants = []
    for fmt in formats:
        statements = [str(s).replace("{FORMAT}", str(fmt)) for s in raw.get("statements") or []]
        variants.append({**raw, "statements": statements,
                         "name": f"{raw.get('name') or 'unnamed'} - {fmt}"})
    return variants


def _config_variants(raw: Any) -> list[Any]:
    """A ksqlDB test with ``"config": [...]`` is one test per value, given to each property whose
    value is ``{CONFIG}`` (in any case), `` - NAME=VALUE`` appended to its name for each, as
    ksqlDB's test loader expands it."""
    values = raw.get("config") if isinstance(raw, dict) else None
    properties = raw.get("properties") if isinstance(raw, dict) else None
    if not isinstance(values, list) or not values or not isinstance(properties, dict):
        return [raw]
    matrixed = [name for name, given in properties.items()
                if isinstance(given, str) and given.strip().upper() == "{CONFIG}"]
    variants = []
    for value in values:
        configured = {**properties, **{name: str(value) for name in matrixed}}
        suffix = "".join(f" - {name}={value}" for name in matrixed)
        variants.append({**raw, "properties": configured,
                         "name": f"{raw.get('name') or 'unnamed'}{suffix}"})
    return variants


def _is_json_lines(text: str) -> bool:
    first = text.split("\n", 1)[0]
    try:
        parsed = json.loads(first)
    except ValueError:
        return False
    return isinstance(parsed, dict) and "statements" in parsed


def _read(path: Path) -> str:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as compressed:
                return compressed.read()
        return path.read_text(encoding="utf-8")
    except (OSError, EOFError) as error:
        reason = getattr(error, "strerror", None) or error
        raise CaseFileError(f"{path}: {reason}") from error


def _parse(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as error:
        raise CaseFileError(f"{where}: not JSON: {error}") from error


def _json(path: Path) -> dict[str, Any]:
    document = _parse(_read(path), str(path))
    if not isinstance(document, dict):
        raise CaseFileError(f"{path}: expected a JSON object")
    return document


def _test(raw: Any, where: str) -> QueryTest:
    if not isinstance(raw, dict) or not isinstance(raw.get("statements"), list):
        raise CaseFileError(f"{where}: a test needs a \"statements\" list")
    name = str(raw.get("name") or "unnamed")
    test_id = str(raw.get("id") or f"{where}::{name}")
    expected = raw.get("expectedException")
    return QueryTest(
        test_id=test_id, name=name,
        statements=tuple(str(s) for s in raw["statements"]),
        inputs=tuple(_record(r, where) for r in raw.get("inputs") or []),
        outputs=tuple(_record(r, where) for r in raw.get("outputs") or []),
        topics=tuple(_topic(t, where) for t in raw.get("topics") or []),
        properties=dict(raw.get("properties") or {}),
        expected_error=expected if isinstance(expected, dict) else None,
        post=raw["post"] if isinstance(raw.get("post"), dict) else {},
        plans=_plans(raw.get("plans"), where))


def _plans(raw: Any, where: str) -> tuple[str, ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(isinstance(plan, str) for plan in raw):
        raise CaseFileError(f"{where}: \"plans\" is a list of plan documents (JSON texts)")
    return tuple(raw)


def _record(raw: Any, where: str) -> CaseRecord:
    if not isinstance(raw, dict) or not isinstance(raw.get("topic"), str):
        raise CaseFileError(f"{where}: a record needs a \"topic\"")
    timestamp = raw.get("timestamp")
    window = raw.get("window")
    headers = raw.get("headers")
    return CaseRecord(
        topic=raw["topic"], key=raw.get("key"), value=raw.get("value"),
        timestamp=int(timestamp) if isinstance(timestamp, int | float) else None,
        headers=None if headers is None else tuple(_header(h, where) for h in headers),
        window=Window(int(window.get("start", 0)), int(window.get("end", 0)),
                      str(window.get("type", "TIME")).upper()) if isinstance(window, dict) else None)


def _header(raw: Any, where: str) -> tuple[str, bytes | None]:
    import base64

    if not isinstance(raw, dict) or "KEY" not in raw:
        raise CaseFileError(f"{where}: a header is {{\"KEY\": ..., \"VALUE\": base64}}")
    value = raw.get("VALUE")
    return str(raw["KEY"]), None if value is None else base64.b64decode(str(value))


def _topic(raw: Any, where: str) -> DeclaredTopic:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise CaseFileError(f"{where}: a declared topic needs a \"name\"")

    def text(name: str) -> str | None:
        value = raw.get(name)
        return value.upper() if isinstance(value, str) else None

    def number(name: str) -> int | None:
        value = raw.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def imports(name: str) -> tuple[SchemaImport, ...]:
        entries = raw.get(name) or []
        if not isinstance(entries, list) or not all(
                isinstance(e, dict) and isinstance(e.get("name"), str) and "schema" in e
                for e in entries):
            raise CaseFileError(f"{where}: {name} is a list of {{name, format, schema}}")
        return tuple(SchemaImport(e["name"], str(e.get("format") or "AVRO").upper(),
                                  e["schema"]) for e in entries)

    return DeclaredTopic(raw["name"], number("partitions"), raw.get("keySchema"),
                         raw.get("valueSchema"), text("keyFormat"), text("valueFormat"),
                         number("keySchemaId"), number("valueSchemaId"),
                         imports("keySchemaReferences"), imports("valueSchemaReferences"))
