"""The ids ksqlDB's test driver gives a test's schemas, which its statements name
(``VALUE_SCHEMA_ID=2``).

The driver starts each test with an empty registry and registers, before the statements run,
the schemas of every topic it knows of (``TestExecutorUtil.initializeTopics``): the topics the
test declares, then those its CREATE statements name with columns in a Schema Registry format
(their schemas derived from the columns), then those of its records, collected in a Java
``HashMap`` by name (``TestCaseBuilderUtil.getAllTopics``) and registered in that map's order,
each topic's key schema before its value schema. A new schema takes the next id. So the order is
the map's: by bucket (the name's ``String.hashCode``, spread as ``HashMap.hash`` does, modulo
the table's final capacity), then by insertion within a bucket.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from metastore.engine import ddl_rules
from metastore.engine.overrides import ConfigOverrides
from metastore.sql import statements as st

_REGISTRY_FORMATS = frozenset({"AVRO", "PROTOBUF", "JSON_SR"})
_INITIAL_CAPACITY = 16
_LOAD_FACTOR = 0.75


@dataclass(frozen=True)
class SchemaSide:
    """One schema the driver registers: a topic's key or value."""

    topic: str
    is_key: bool


def statement_sides(statements: Iterable[st.Statement], config: ConfigOverrides
                    ) -> list[SchemaSide]:
    """The sides whose schemas CREATE statements (not C*AS) derive from their columns: a side
    in a Schema Registry format that declares columns."""
    sides: list[SchemaSide] = []
    for statement in statements:
        if not isinstance(statement, st.CreateSource):
            continue
        topic = ddl_rules.with_clause_value(statement.properties, "KAFKA_TOPIC")
        if topic is None:
            continue
        key, value = ddl_rules.given_formats(statement.properties)
        formats = ((key or config.default_key_format or "").upper(),
                   (value or config.default_value_format or "").upper())
        for is_key, fmt in zip((True, False), formats, strict=True):
            declared = any(c.role.is_key if is_key else c.role is st.ColumnRole.VALUE
                           for c in statement.columns)
            if fmt in _REGISTRY_FORMATS and declared:
                sides.append(SchemaSide(str(topic), is_key))
    return sides


def registration_order(topic_names: Sequence[str], sides: Iterable[SchemaSide]
                       ) -> list[SchemaSide]:
    """``sides`` in the order the driver registers them: their topics in the order of a Java
    ``HashMap`` into which ``topic_names`` (every topic it knows of, in insertion order) went,
    each topic's key before its value."""
    wanted = set(sides)
    order = java_hash_map_order(topic_names)
    return [side for name in order for side in (SchemaSide(name, True), SchemaSide(name, False))
            if side in wanted]


def java_hash_map_order(keys: Sequence[str]) -> list[str]:
    """The iteration order of a ``java.util.HashMap<String, ?>`` after ``keys`` were put in
    order (no tree bins: a bucket of eight or more keys is beyond any test)."""
    distinct = list(dict.fromkeys(keys))
    capacity = _INITIAL_CAPACITY
    while len(distinct) > capacity * _LOAD_FACTOR:
        capacity *= 2
    position = {name: index for index, name in enumerate(distinct)}
    return sorted(distinct, key=lambda name: (_spread(_string_hash(name)) & (capacity - 1),
                                              position[name]))


def _string_hash(text: str) -> int:
    """Java's ``String.hashCode``, over UTF-16 code units, as an unsigned 32-bit number."""
    units = text.encode("utf-16-be")
    value = 0
    for index in range(0, len(units), 2):
        value = (31 * value + int.from_bytes(units[index:index + 2], "big")) & 0xFFFFFFFF
    return value


def _spread(value: int) -> int:
    """``HashMap.hash``: the high half XORed into the low half."""
    return (value ^ (value >> 16)) & 0xFFFFFFFF
