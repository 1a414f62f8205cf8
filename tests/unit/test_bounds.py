"""Replay is total by construction: what validation accepts applies within a small, fixed stack.

Every bound of metastore.core.limits is refused one step past it with a clear error, and a log holding
records at every bound replays in a fresh process whose recursion limit is a quarter of Python's
default (and compiles, as every node's query runtime does, in a thread with a small stack).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from metastore.catalog import exceptions as errors
from metastore.catalog.image import EMPTY_IMAGE, Image, apply
from metastore.core.limits import (
    MAX_EXPRESSION_DEPTH,
    MAX_NAME_LENGTH,
    MAX_NESTING,
    MAX_STATEMENT_CHARS,
    MAX_TYPE_DEPTH,
    RequestLimits,
)
from metastore.engine.validation import Validator, Write
from metastore.log.record import CommandRecord
from metastore.sql.exceptions import TooComplexError
from metastore.sql.parser import parse

SMALL_RECURSION_LIMIT = 250


class Topics:
    """Every topic exists with one partition, on a cluster of three brokers."""

    def partitions(self, topic: str) -> int | None:
        return 1 if not topic.startswith("new") else None

    def broker_count(self) -> int | None:
        return 3


def run(script: str, image: Image = EMPTY_IMAGE,
        limits: RequestLimits | None = None) -> tuple[Image, list[CommandRecord]]:
    records: list[CommandRecord] = []
    validator = Validator(image, Topics(), limits=limits)
    for statement in parse(script):
        outcome = validator.validate(statement)
        if isinstance(outcome, Write):
            records.append(CommandRecord(outcome.command, statement.text, f"r{len(records)}"))
    return validator.image, records


def refused(script: str, image: Image = EMPTY_IMAGE, limits: RequestLimits | None = None) -> str:
    with pytest.raises((errors.StatementError, TooComplexError)) as raised:
        run(script, image, limits)
    return str(raised.value.message)


def type_chain(levels: int) -> str:
    """CREATE TYPE T1 AS ARRAY<INT>; T2 AS ARRAY<T1>; ...: type T<n> is n + 1 levels deep."""
    lines = ["CREATE TYPE T1 AS ARRAY<INT>;"]
    lines += [f"CREATE TYPE T{i} AS ARRAY<T{i - 1}>;" for i in range(2, levels + 1)]
    return "\n".join(lines)


BASE = "CREATE STREAM S (ID INT KEY, A INT, B STRING) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');"


# -- the replay bounds -------------------------------------------------------------------------
def test_a_chain_of_custom_types_stops_at_the_type_depth() -> None:
    image, _ = run(type_chain(MAX_TYPE_DEPTH - 1))
    message = refused(f"CREATE TYPE T{MAX_TYPE_DEPTH} AS ARRAY<T{MAX_TYPE_DEPTH - 1}>;", image)
    assert f"nested {MAX_TYPE_DEPTH + 1} levels deep" in message
    message = refused(f"CREATE STREAM X (K INT KEY, V ARRAY<T{MAX_TYPE_DEPTH - 1}>) WITH "
                      "(KAFKA_TOPIC='s', VALUE_FORMAT='JSON');", image)
    assert "custom types resolved" in message


def test_a_type_written_too_deep_is_a_syntax_error_at_its_position() -> None:
    deep = "ARRAY<" * (MAX_TYPE_DEPTH + 1) + "INT" + ">" * (MAX_TYPE_DEPTH + 1)
    with pytest.raises(TooComplexError) as raised:
        parse(f"CREATE TYPE DEEP AS {deep};")
    assert raised.value.line == 1 and raised.value.column > 20
    assert f"deeper than {MAX_TYPE_DEPTH}" in raised.value.message


@pytest.mark.parametrize("expression", [
    "(" * (MAX_NESTING + 1) + "A" + ")" * (MAX_NESTING + 1),
    "ABS(" * (MAX_NESTING + 1) + "A" + ")" * (MAX_NESTING + 1),
    " + ".join(["A"] * (MAX_EXPRESSION_DEPTH + 1)),
    "(" * 100_000,
])
def test_deep_expressions_are_refused_before_the_recursive_parser(expression: str) -> None:
    with pytest.raises(TooComplexError) as raised:
        parse(f"CREATE STREAM X AS SELECT ID, {expression} AS C FROM S;")
    assert "deeper than" in raised.value.message


def test_long_names_and_statements_are_refused() -> None:
    image, _ = run(BASE)
    long_name = "N" * (MAX_NAME_LENGTH + 1)
    assert "characters long" in refused(
        f"CREATE STREAM {long_name} (K INT KEY) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');")
    assert "characters long" in refused(f"CREATE STREAM X AS SELECT ID, A AS {long_name} FROM S;",
                                        image)
    assert "characters long" in refused(
        f"CREATE TYPE T AS STRUCT<{long_name} INT>;")
    padding = " " * MAX_STATEMENT_CHARS
    with pytest.raises(TooComplexError, match="characters long"):
        parse(f"SHOW STREAMS{padding};")


# -- topics ------------------------------------------------------------------------------------
@pytest.mark.parametrize("topic", ["_metastore-other-command-log", "_metastore-x-snapshots",
                                   "__consumer_offsets", "__transaction_state"])
def test_internal_topics_are_neither_sources_nor_sinks(topic: str) -> None:
    image, _ = run(BASE)
    assert "internal topic" in refused(
        f"CREATE STREAM X (ID INT KEY) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON');")
    assert "internal topic" in refused(
        f"CREATE SOURCE STREAM X (ID INT KEY) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON');")
    assert "internal topic" in refused(
        f"CREATE STREAM X WITH (KAFKA_TOPIC='{topic}') AS SELECT * FROM S;", image)


def test_read_only_topics_can_be_read_never_written_nor_deleted() -> None:
    image, _ = run("CREATE STREAM SCHEMAS (ID INT KEY) WITH (KAFKA_TOPIC='_schemas', "
                   "VALUE_FORMAT='JSON');\n" + BASE)
    assert "read-only topic: _schemas" in refused("DROP STREAM SCHEMAS DELETE TOPIC;", image)
    assert "read-only topic" in refused(
        "CREATE STREAM X WITH (KAFKA_TOPIC='_schemas') AS SELECT * FROM S;", image)
    assert "read-only topic" in refused("INSERT INTO SCHEMAS SELECT ID FROM S;", image)


def test_delete_topic_refuses_while_another_source_uses_the_topic() -> None:
    image, _ = run(BASE + "\nCREATE STREAM T (ID INT KEY, A INT) WITH (KAFKA_TOPIC='s', "
                   "VALUE_FORMAT='JSON');")
    message = refused("DROP STREAM S DELETE TOPIC;", image)
    assert message == "Refusing to delete topic. Found other data sources (T) using topic s"
    run("DROP STREAM T; DROP STREAM S DELETE TOPIC;", image)


@pytest.mark.parametrize(("topic", "expected"), [
    ("bad\x00name", "only ASCII letters"), ("with space", "only ASCII letters"),
    ("..", "must not be empty"), ("t" * 250, "at most 249"),
])
def test_illegal_topic_names_are_refused_at_validation(topic: str, expected: str) -> None:
    assert expected in refused(f"CREATE STREAM X (ID INT KEY) WITH (KAFKA_TOPIC='{topic}', "
                               "VALUE_FORMAT='JSON', PARTITIONS=1);")


def test_partitions_and_replicas_are_bounded() -> None:
    create = ("CREATE STREAM X (ID INT KEY) WITH (KAFKA_TOPIC='new_x', VALUE_FORMAT='JSON', "
              "PARTITIONS={p}, REPLICAS={r});")
    assert "at most 1000 partitions" in refused(create.format(p=1001, r=1))
    assert "32-bit integer" in refused(create.format(p=2 ** 40, r=1))  # ksqlDB: a Long
    assert "larger than available brokers: the cluster has 3" in refused(create.format(p=1, r=4))
    assert "larger than available brokers" in refused(create.format(p=1, r=40000))
    limits = RequestLimits(max_topics_created=2, max_partitions_created=10)
    many = "\n".join(f"CREATE STREAM X{i} (ID INT KEY) WITH (KAFKA_TOPIC='new_{i}', "
                     "VALUE_FORMAT='JSON', PARTITIONS=1);" for i in range(3))
    assert "at most 2 topics" in refused(many, limits=limits)
    big = "\n".join(f"CREATE STREAM X{i} (ID INT KEY) WITH (KAFKA_TOPIC='new_{i}', "
                    "VALUE_FORMAT='JSON', PARTITIONS=6);" for i in range(2))
    assert "at most 10 partitions" in refused(big, limits=limits)


# -- replay within a small stack -----------------------------------------------------------------
def bounded_log() -> tuple[list[CommandRecord], Image]:
    """Records at every bound: the deepest type, nesting, expression, the longest names."""
    field = "F" * MAX_NAME_LENGTH
    struct = "STRUCT<" + " ".join(f"{field} STRUCT<" for _ in range(MAX_TYPE_DEPTH - 2))
    struct += f"{field} INT" + ">" * (MAX_TYPE_DEPTH - 1)
    nested = "ABS(" * (MAX_NESTING - 1) + "A" + ")" * (MAX_NESTING - 1)
    chain = " + ".join(["A"] * (MAX_EXPRESSION_DEPTH - 8))
    long_name = "L" * MAX_NAME_LENGTH
    script = "\n".join([
        type_chain(MAX_TYPE_DEPTH - 1), BASE,
        f"CREATE STREAM {long_name} (ID INT KEY, {field} {struct}, D T{MAX_TYPE_DEPTH - 1}) "
        "WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');",
        f"CREATE STREAM N AS SELECT ID, {nested} AS X, {chain} AS Y FROM S;",
        f"ALTER STREAM {long_name} ADD COLUMN E T{MAX_TYPE_DEPTH - 1};",
    ])
    image, records = run(script)
    return records, image


REPLAY = textwrap.dedent("""
    import sys, threading
    from metastore.catalog.image import EMPTY_IMAGE
    from metastore.log.replay import replay_encoded
    from metastore.planner.plan import parse_query
    values = [line.strip().encode() for line in open(sys.argv[1])]
    sys.setrecursionlimit(int(sys.argv[2]))
    result = replay_encoded(EMPTY_IMAGE, enumerate(values))
    assert result.error is None, result.error
    print(result.image.fingerprint)
    sys.setrecursionlimit(1000)
    threading.stack_size(2 * 1024 * 1024)
    compiled = []
    def compile_queries():
        for query in result.image.queries.values():
            compiled.append(parse_query(query.sql))
    worker = threading.Thread(target=compile_queries)
    worker.start()
    worker.join()
    print(len(compiled))
""")


def test_a_log_at_every_bound_replays_in_a_fresh_process_with_a_small_stack(
        tmp_path: Path) -> None:
    records, image = bounded_log()
    expected = EMPTY_IMAGE
    for offset, record in enumerate(records):
        expected = apply(expected, record, offset)
    assert set(expected.sources) == set(image.sources) and set(expected.queries) == set(
        image.queries)
    log = tmp_path / "log.jsonl"
    log.write_text("".join(record.encode()[1].decode() + "\n" for record in records))
    done = subprocess.run([sys.executable, "-c", REPLAY, str(log), str(SMALL_RECURSION_LIMIT)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    fingerprint, compiled = done.stdout.split()
    assert fingerprint == expected.fingerprint
    assert int(compiled) == len(expected.queries) == 1


def test_validation_itself_never_recurses_past_the_default_limit() -> None:
    """The request thread parses and validates the bounded log well inside Python's default."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(900)
    try:
        bounded_log()
    finally:
        sys.setrecursionlimit(limit)
