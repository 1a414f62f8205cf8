"""ksqlDB configuration overrides: resolution of names and values, and their effect on the commands
validation writes (formats, wrapping, a query's settings), which replay alone reproduces."""

from __future__ import annotations

from typing import Any

import pytest

from metastore.catalog import commands as cmd
from metastore.catalog.exceptions import StatementError
from metastore.catalog.image import EMPTY_IMAGE, Delta, Image, apply
from metastore.catalog.model import DataSource
from metastore.checkpoint import codec
from metastore.engine import overrides
from metastore.engine.overrides import ConfigError, ConfigOverrides
from metastore.engine.validation import Validator, Write
from metastore.log.record import CommandRecord, decode
from metastore.log.state import ReplicaState
from metastore.log.writer import request_digest
from metastore.planner.plan import compile_query
from metastore.planner.support import check_runtime
from metastore.sql.parser import parse
from metastore.testing.check import AssumedTopics

STREAM = ("CREATE STREAM S (K STRING KEY, V INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON', "
          "PARTITIONS=1);")


def run(script: str, properties: dict[str, Any] | None = None, strict: bool = True,
        runtime: bool = False) -> tuple[list[CommandRecord], Image]:
    """Validate ``script`` with ``properties``; the records written and the replayed image."""
    validator = Validator(EMPTY_IMAGE, AssumedTopics(), runtime_check=check_runtime if runtime
                          else None, config=overrides.resolve(properties, strict=strict))
    records = []
    for statement in parse(script):
        outcome = validator.validate(statement)
        if isinstance(outcome, Write):
            records.append(CommandRecord(outcome.command, statement.text, "", "n1"))
    image = EMPTY_IMAGE
    for offset, record in enumerate(records):  # replay reads the encoded records only
        image = apply(image, decode(record.encode()[1], offset), offset)
    assert image.fingerprint == validator.image.fingerprint
    return records, image


def source(image: Image, name: str) -> DataSource:
    found = image.source(name)
    assert found is not None
    return found


# -- resolution -------------------------------------------------------------------------------------
def test_values_parse_as_ksqldb_parses_them() -> None:
    config = overrides.resolve({
        "ksql.persistence.default.format.value": "json", "ksql.persistence.default.format.key":
        " delimited", "ksql.persistence.wrap.single.values": "FALSE",
        "ksql.functions.collect_list.limit": "3", "ksql.functions.collect_set.limit": 1,
        "ksql.functions.substring.legacy.args": False, "ksql.new.query.planner.enabled": "true",
        "ksql.streams.auto.offset.reset": "earliest", "auto.offset.reset": "latest",
        "ksql.streams.__emit.interval.ms.kstreams.windowed.aggregation__": 0})
    assert config.default_value_format == "JSON"
    assert config.default_key_format == "DELIMITED"
    assert config.wrap_single_values is False
    assert config.query_config() == (("auto.offset.reset", "latest"),
                                     ("ksql.functions.collect_list.limit", "3"),
                                     ("ksql.functions.collect_set.limit", "1"),
                                     ("ksql.new.query.planner.enabled", "true"))
    assert overrides.offset_reset(config.values) == "latest"
    assert overrides.offset_reset({}) is None


def test_no_overrides_are_ksqldb_defaults() -> None:
    config = overrides.resolve(None)
    assert config == overrides.NO_OVERRIDES
    assert (config.default_key_format, config.default_value_format,
            config.wrap_single_values, config.query_config()) == ("KAFKA", None, None, ())
    assert overrides.resolve({"ksql.persistence.wrap.single.values": None}) == config


@pytest.mark.parametrize(("properties", "message"), [
    ({"ksql.no.such.setting": "x"},
     "Not recognizable as ksql, streams, consumer, or producer property: 'ksql.no.such.setting'"),
    ({"ksql.service.id": "other"}, "prohibited by the KSQL server denylist"),
    ({"ksql.persistence.wrap.single.values": "maybe"},
     "Failed to coerce type of value 'maybe' for key 'ksql.persistence.wrap.single.values': "
     "Expected value to be either true or false"),
    ({"ksql.persistence.wrap.single.values": 1}, "Expected value to be either true or false"),
    ({"ksql.persistence.default.format.value": "XML"},
     "Invalid value for config 'ksql.persistence.default.format.value': XML"),
    ({"ksql.persistence.default.format.key": ["JSON"]}, "Expected a string"),
    ({"ksql.functions.collect_list.limit": "ten"}, "Expected a whole number"),
    ({"ksql.functions.collect_set.limit": 1.5}, "Expected a whole number"),
    ({"ksql.functions.collect_set.limit": True}, "Expected a whole number"),
    ({"ksql.functions.collect_set.limit": 2 ** 40}, "Expected a whole number"),
    ({"auto.offset.reset": "none"}, "'none' is not valid for this property within KSQL"),
])
def test_bad_overrides_are_clear_errors(properties: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        overrides.resolve(properties)
    assert message in raised.value.message


def test_lenient_resolution_ignores_unknown_names_but_not_bad_values() -> None:
    assert overrides.resolve({"ksql.windowed.session.key.legacy": "false"}, strict=False) == (
        overrides.NO_OVERRIDES)
    with pytest.raises(ConfigError):
        overrides.resolve({"ksql.persistence.wrap.single.values": "x"}, strict=False)


def test_set_and_unset() -> None:
    config = ConfigOverrides().set("ksql.persistence.default.format.value", "avro")
    assert config.default_value_format == "AVRO"
    assert config.set("ksql.persistence.default.format.value", None).default_value_format is None
    with pytest.raises(ConfigError, match=r"Unknown property: ksql\.nope"):
        config.set("ksql.nope", "1")


# -- effects on validation --------------------------------------------------------------------------
def test_default_formats_become_the_commands_formats() -> None:
    script = "CREATE STREAM S (K STRING KEY, V INT) WITH (KAFKA_TOPIC='s', PARTITIONS=1);"
    records, image = run(script, {"ksql.persistence.default.format.value": "DELIMITED",
                                  "ksql.persistence.default.format.key": "JSON"})
    assert (source(image, "S").key_format, source(image, "S").value_format) == ("JSON",
                                                                                "DELIMITED")
    written = cmd.to_json(records[0].command)["source"]
    assert (written["keyFormat"], written["valueFormat"]) == ("JSON", "DELIMITED")


def test_statement_formats_win_over_defaults() -> None:
    _, image = run("CREATE STREAM S (K STRING KEY, V STRING) WITH (KAFKA_TOPIC='s', "
                   "FORMAT='KAFKA', PARTITIONS=1);",
                   {"ksql.persistence.default.format.value": "JSON",
                    "ksql.persistence.default.format.key": "JSON"})
    assert (source(image, "S").key_format, source(image, "S").value_format) == ("KAFKA", "KAFKA")


def test_without_a_default_value_format_the_statement_needs_one() -> None:
    with pytest.raises(StatementError, match="missing the 'VALUE_FORMAT' property"):
        run("CREATE STREAM S (V INT) WITH (KAFKA_TOPIC='s', PARTITIONS=1);")


def test_a_query_keyed_from_a_keyless_source_takes_the_default_key_format() -> None:
    script = ("CREATE STREAM I (FOO INT) WITH (KAFKA_TOPIC='i', KEY_FORMAT='NONE', "
              "VALUE_FORMAT='JSON', PARTITIONS=1);"
              "CREATE TABLE O AS SELECT FOO, COUNT() AS N FROM I GROUP BY FOO;")
    _, image = run(script, {"ksql.persistence.default.format.key": "JSON"})
    assert source(image, "O").key_format == "JSON"
    _, image = run(script)
    assert source(image, "O").key_format == "KAFKA"


def test_wrapping_applies_to_single_value_columns_only() -> None:
    script = ("CREATE STREAM I (K STRING KEY, FOO STRING) WITH (KAFKA_TOPIC='i', "
              "VALUE_FORMAT='JSON', PARTITIONS=1);"
              "CREATE STREAM TWO AS SELECT K, FOO, FOO AS FOO2 FROM I;"
              "CREATE STREAM ONE AS SELECT K, FOO FROM TWO;"
              "CREATE STREAM KEEP WITH (WRAP_SINGLE_VALUE=true) AS SELECT K, FOO FROM TWO;")
    _, image = run(script, {"ksql.persistence.wrap.single.values": "false"})
    assert source(image, "I").property("WRAP_SINGLE_VALUE") == "false"
    assert source(image, "TWO").property("WRAP_SINGLE_VALUE") is None
    assert source(image, "ONE").property("WRAP_SINGLE_VALUE") == "false"
    assert source(image, "KEEP").property("WRAP_SINGLE_VALUE") == "true"
    _, image = run(script)
    assert source(image, "I").property("WRAP_SINGLE_VALUE") is None


def test_wrapping_a_format_does_not_support_is_not_applied() -> None:
    _, image = run("CREATE STREAM I (K STRING KEY, FOO STRING) WITH (KAFKA_TOPIC='i', "
                   "VALUE_FORMAT='KAFKA', PARTITIONS=1);",
                   {"ksql.persistence.wrap.single.values": True})
    assert source(image, "I").property("WRAP_SINGLE_VALUE") is None


def test_a_query_keeps_its_settings_through_the_log_and_checkpoints() -> None:
    script = (STREAM + "CREATE TABLE T AS SELECT K, COLLECT_LIST(V) AS L FROM S GROUP BY K;"
              "CREATE STREAM S2 AS SELECT * FROM S; INSERT INTO S2 SELECT * FROM S;")
    records, image = run(script, {"ksql.functions.collect_list.limit": 2}, runtime=True)
    assert cmd.to_json(records[1].command)["config"] == {"ksql.functions.collect_list.limit": "2"}
    queries = sorted(image.queries.values(), key=lambda q: q.offset)
    assert [q.config for q in queries] == [(("ksql.functions.collect_list.limit", "2"),)] * 3
    restored = codec.decode(codec.encode(ReplicaState(image, {}, {}))).image
    assert restored.fingerprint == image.fingerprint
    assert restored.queries[queries[0].query_id].config == queries[0].config
    plan = compile_query(queries[0], image)
    assert "slice(" in plan.sql.lower()
    unlimited = compile_query(run(script, runtime=True)[1].queries[queries[0].query_id], image)
    assert "slice(" not in unlimited.sql.lower()


def test_records_without_settings_encode_and_fingerprint_as_before() -> None:
    records, image = run(STREAM + "CREATE STREAM S2 AS SELECT * FROM S;")
    assert "config" not in cmd.to_json(records[1].command)
    assert image.canonical()["queries"][0] == ["CSAS_S2_1", "CSAS", "S2", ["S"],
                                               image.queries["CSAS_S2_1"].sql, 1]
    old = cmd.to_json(records[1].command)
    assert cmd.from_json(old) == records[1].command


def test_set_changes_the_statements_after_it() -> None:
    _, image = run("SET 'ksql.persistence.default.format.value' = 'DELIMITED';"
                   "CREATE STREAM A (V INT) WITH (KAFKA_TOPIC='a', PARTITIONS=1);"
                   "UNSET 'ksql.persistence.default.format.value';"
                   "CREATE STREAM B (V INT) WITH (KAFKA_TOPIC='b', VALUE_FORMAT='JSON', "
                   "PARTITIONS=1);")
    assert source(image, "A").value_format == "DELIMITED"
    with pytest.raises(ConfigError, match=r"Unknown property: ksql\.typo"):
        run("SET 'ksql.typo' = 'x';")


def test_a_request_digest_binds_its_overrides() -> None:
    statements = parse(STREAM)
    assert request_digest(statements) == request_digest(statements, overrides.NO_OVERRIDES)
    assert request_digest(statements) != request_digest(
        statements, overrides.resolve({"ksql.persistence.default.format.key": "JSON"}))
    assert request_digest(statements) == request_digest(
        statements, overrides.resolve({"ksql.nested.error.set.null": "true"}))


def test_replay_needs_no_overrides() -> None:
    records, image = run("CREATE STREAM S (K STRING KEY, V INT) WITH (KAFKA_TOPIC='s', "
                         "PARTITIONS=1);", {"ksql.persistence.default.format.value": "JSON"})
    delta = Delta(EMPTY_IMAGE)
    delta.replay(decode(records[0].encode()[1], 0), 0)
    assert delta.apply().fingerprint == image.fingerprint


def test_the_new_query_planner_keys_a_projection_as_it_selects_them() -> None:
    script = ("CREATE STREAM I (ID INT KEY, AGE INT KEY, NAME STRING) WITH (KAFKA_TOPIC='i', "
              "FORMAT='JSON', PARTITIONS=1);"
              "CREATE STREAM O AS SELECT AGE, ID, NAME FROM I;")
    keys = [[c.name for c in source(image, "O").key_columns]
            for image in (run(script)[1], run(script, {"ksql.new.query.planner.enabled": False})[1],
                          run(script, {"ksql.new.query.planner.enabled": "true"})[1])]
    assert keys == [["ID", "AGE"], ["ID", "AGE"], ["AGE", "ID"]]  # ksqlDB: source order by default
    keyless = "CREATE STREAM K AS SELECT NAME FROM I;"
    with pytest.raises(StatementError, match="Keys missing from projection"):
        run(script + keyless)
    _, image = run(script + keyless, {"ksql.new.query.planner.enabled": "true"}, runtime=True)
    assert source(image, "K").key_columns == ()
    query = next(q for q in image.queries.values() if q.sink == "K")
    assert dict(query.config) == {"ksql.new.query.planner.enabled": "true"}
    assert "ELSE CAST(NULL AS BINARY) END AS key" in compile_query(query, image).sql  # as analysed
    planner = {"ksql.new.query.planner.enabled": "true"}
    _, image = run(script + "CREATE STREAM P AS SELECT NAME, ID FROM I;"
                   "INSERT INTO P SELECT NAME, ID FROM I;", planner)  # keyed by the keys selected
    assert [c.name for c in source(image, "P").key_columns] == ["ID"]
    for clause, query_text in (("WHERE", "SELECT * FROM I WHERE ID = 1"),
                               ("PARTITION BY", "SELECT * FROM I PARTITION BY NAME"),
                               ("only support column", "SELECT ID, UCASE(NAME) AS N FROM I")):
        with pytest.raises(StatementError, match=clause):
            run(f"{script}CREATE STREAM Q AS {query_text};", planner)


def test_the_output_topic_prefix_names_a_sink_topic_no_statement_names() -> None:
    prefix = {"ksql.output.topic.name.prefix": "team-a-"}
    _records, image = run(STREAM + "CREATE STREAM S2 AS SELECT * FROM S;"
                          "CREATE STREAM S3 WITH (KAFKA_TOPIC='named') AS SELECT * FROM S;", prefix)
    assert (image.sources["S2"].topic, image.sources["S3"].topic) == ("team-a-S2", "named")
    _records, image = run(STREAM + "CREATE STREAM S2 AS SELECT * FROM S;")
    assert image.sources["S2"].topic == "S2"


# -- the processing guarantee -------------------------------------------------------------------
def test_the_processing_guarantee_a_query_is_written_with() -> None:
    query = "CREATE STREAM T AS SELECT * FROM S;"
    for properties, stored in [({}, None),
                               ({"processing.guarantee": "exactly_once_v2"}, "exactly_once_v2"),
                               ({"ksql.streams.processing.guarantee": " exactly_once "},
                                "exactly_once"),
                               ({"processing.guarantee": "at_least_once"}, "at_least_once")]:
        _, image = run(STREAM + query, properties)
        [written] = image.queries.values()
        assert dict(written.config).get("processing.guarantee") == stored
        assert overrides.exactly_once(dict(written.config)) == (stored or "").startswith(
            "exactly_once")
    with pytest.raises(ConfigError, match=r"Invalid value exactly_twice for configuration "
                                          r"processing\.guarantee: String must be one of: "
                                          r"at_least_once, exactly_once, exactly_once_beta, "
                                          r"exactly_once_v2"):
        overrides.resolve({"processing.guarantee": "exactly_twice"})
    with pytest.raises(ConfigError, match="Invalid value EXACTLY_ONCE_V2"):  # Kafka's exact names
        overrides.resolve({"processing.guarantee": "EXACTLY_ONCE_V2"})


def test_a_nodes_default_guarantee_applies_where_a_request_gives_none() -> None:
    from metastore.server.settings import SettingsError, server_settings

    settings = server_settings({"bootstrap_servers": "k:9092", "ksql_properties": {
        "ksql.streams.processing.guarantee": "exactly_once_v2",
        "ksql.logging.processing.rows.include": True}})
    defaults = settings.node.query_defaults
    assert defaults == {"ksql.streams.processing.guarantee": "exactly_once_v2"}
    assert settings.processing_log.rows_include
    given = overrides.resolve({}).with_defaults(defaults)
    assert dict(given.query_config())["processing.guarantee"] == "exactly_once_v2"
    assert given.given == {}, "SHOW PROPERTIES lists it as the node's, not the request's"
    asked = overrides.resolve({"processing.guarantee": "at_least_once"}).with_defaults(defaults)
    assert dict(asked.query_config())["processing.guarantee"] == "at_least_once"
    assert asked.values == overrides.resolve({"processing.guarantee": "at_least_once"}).values, (
        "a retry is compared by the request's own overrides")
    set_later = given.set("processing.guarantee", "at_least_once")  # SET in the request
    assert dict(set_later.query_config())["processing.guarantee"] == "at_least_once"
    both = overrides.resolve({"ksql.streams.processing.guarantee": "exactly_once_v2"}).set(
        "processing.guarantee", "at_least_once")
    assert dict(both.query_config())["processing.guarantee"] == "at_least_once", "SET replaces"
    with pytest.raises(SettingsError, match=r"processing\.guarantee"):
        server_settings({"bootstrap_servers": "k:9092", "ksql_properties": {
            "ksql.streams.processing.guarantee": "twice"}})
