"""The connector statements' grammar as ksqlDB's: names and keys as ksqlDB normalises them,
values as the Connect strings ksqlDB makes of literals, the text masked but the class, and the
state ksqlDB sums a connector's status up with."""

from __future__ import annotations

from pathlib import Path

import pytest

from metastore.connect.settings import ConnectSettings, ConnectSettingsError, connect_settings
from metastore.connect.statements import summary
from metastore.sql import statements as st
from metastore.sql.connector_config import java_number, masked_text
from metastore.sql.exceptions import ParseError
from metastore.sql.parser import parse
from metastore.sql.variables import parse_request


def one(text: str) -> st.Statement:
    [statement] = parse(text)
    return statement


def test_create_connector_keeps_quoted_names_and_keys_and_makes_connect_strings() -> None:
    statement = one("CREATE SOURCE CONNECTOR IF NOT EXISTS jdbc WITH ("
                    "'connector.class'='io.x.Source', \"Mixed\"='a''b', plain=1, "
                    "'tasks.max'=2, flag=TRUE, nothing=NULL, ratio=1.50, big=1E3, neg=-5);")
    assert isinstance(statement, st.CreateConnector)
    assert (statement.kind, statement.name, statement.if_not_exists) == (
        st.ConnectorKind.SOURCE, "JDBC", True)
    assert statement.config == {
        "connector.class": "io.x.Source", "Mixed": "a'b", "PLAIN": "1", "tasks.max": "2",
        "FLAG": "true", "NOTHING": "null", "RATIO": "1.50", "BIG": "1000.0", "NEG": "-5",
        "name": "JDBC"}
    assert statement.text == (
        "CREATE SOURCE CONNECTOR IF NOT EXISTS JDBC WITH ('connector.class'='io.x.Source', "
        "'Mixed'='[string]', 'PLAIN'='[string]', 'tasks.max'='[string]', 'FLAG'='[string]', "
        "'NOTHING'='[string]', 'RATIO'='[string]', 'BIG'='[string]', 'NEG'='[string]');")


def test_a_user_name_property_is_the_connectors_name() -> None:
    statement = one("CREATE SINK CONNECTOR `my-sink` WITH ('connector.class'='S', 'name'='x');")
    assert isinstance(statement, st.CreateConnector)
    assert statement.config["name"] == "my-sink"
    assert statement.text.startswith("CREATE SINK CONNECTOR `my-sink` WITH (")


@pytest.mark.parametrize(("text", "expected"), [
    ("DROP CONNECTOR c;", st.DropConnector("DROP CONNECTOR c;", st.Location(1, 1), "C")),
    ("DROP CONNECTOR IF EXISTS `c`;",
     st.DropConnector("DROP CONNECTOR IF EXISTS `c`;", st.Location(1, 1), "c", True)),
    ("DESCRIBE CONNECTOR \"c\";",
     st.DescribeConnector("DESCRIBE CONNECTOR \"c\";", st.Location(1, 1), "c")),
    ("SHOW CONNECTORS;", st.ListConnectors("SHOW CONNECTORS;", st.Location(1, 1), None)),
    ("list source connectors;", st.ListConnectors("list source connectors;", st.Location(1, 1),
                                                  st.ConnectorKind.SOURCE)),
    ("SHOW SINK CONNECTORS;",
     st.ListConnectors("SHOW SINK CONNECTORS;", st.Location(1, 1), st.ConnectorKind.SINK)),
    ("SHOW CONNECTOR PLUGINS;",
     st.ListConnectorPlugins("SHOW CONNECTOR PLUGINS;", st.Location(1, 1))),
])
def test_the_other_connector_statements(text: str, expected: st.Statement) -> None:
    statement = one(text)
    assert statement == expected
    assert not statement.writes_log


@pytest.mark.parametrize(("text", "message"), [
    ("CREATE SOURCE CONNECTOR c;", "Expecting WITH"),
    ("CREATE SOURCE CONNECTOR c WITH ();", "Expecting a property name"),
    ("CREATE SINK CONNECTOR c WITH ('a'='1', 'a'='2');", "Duplicate property: a"),
    ("CREATE SINK CONNECTOR c WITH (tasks.max=1);", "Expecting '='"),
    ("CREATE SINK STREAM s;", "Expecting CONNECTOR after SINK"),
    ("CREATE OR REPLACE SOURCE CONNECTOR c WITH ('a'='b');", "Expecting STREAM or TABLE"),
])
def test_malformed_connector_statements_are_parse_errors(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse(text)


def test_a_source_named_connector_is_still_described_and_created() -> None:
    assert one("DESCRIBE CONNECTOR;") == st.Describe("DESCRIBE CONNECTOR;", st.Location(1, 1),
                                                     "CONNECTOR")
    assert isinstance(one("CREATE SOURCE STREAM S (A INT) WITH (KAFKA_TOPIC='t', "
                          "VALUE_FORMAT='JSON');"), st.CreateSource)


def test_variables_are_substituted_in_a_connectors_properties() -> None:
    [statement] = parse_request("CREATE SOURCE CONNECTOR c WITH ('connector.class'='${cls}', "
                                "'file'='${path}');", {"cls": "FileStreamSource",
                                                       "path": "/tmp/it's"})
    assert isinstance(statement, st.CreateConnector)
    assert statement.config["connector.class"] == "FileStreamSource"
    assert statement.config["file"] == "/tmp/it's"
    assert "/tmp" not in statement.text


@pytest.mark.parametrize(("literal", "java"), [
    ("10", "10"), ("-5", "-5"), ("1.50", "1.50"), (".5", "0.5"), ("1E3", "1000.0"),
    ("1.5e10", "1.5E10"), ("1e-4", "1.0E-4"), ("2.5E-3", "0.0025"), ("1e7", "1.0E7"),
    ("123456789.0e0", "1.23456789E8"), ("0e0", "0.0")])
def test_numbers_reach_connect_as_java_prints_them(literal: str, java: str) -> None:
    assert java_number(literal) == java


@pytest.mark.parametrize(("status", "shown"), [
    ({"connector": {"state": "RUNNING"}, "tasks": [{"state": "RUNNING"}]},
     "RUNNING (1/1 tasks RUNNING)"),
    ({"connector": {"state": "RUNNING"}, "tasks": [{"state": "FAILED"}, {"state": "FAILED"}]},
     "WARNING (0/2 tasks RUNNING)"),
    ({"connector": {"state": "RUNNING"}, "tasks": []}, "RUNNING (0/0 tasks RUNNING)"),
    ({"connector": {"state": "PAUSED"}, "tasks": [{"state": "PAUSED"}]}, "PAUSED"),
    ({}, "UNKNOWN"),
])
def test_a_connectors_state_is_summed_up_as_ksqldb_does(status: dict[str, object],
                                                         shown: str) -> None:
    assert summary(status) == shown  # type: ignore[arg-type]


def test_a_nodes_connect_settings_take_ksqldbs_properties(tmp_path: Path) -> None:
    assert connect_settings(None, {}) == ConnectSettings("http://localhost:8083", 30.0, None)
    credentials = tmp_path / "connect.properties"
    credentials.write_text("username=ops\npassword=s3cret\n")
    chosen = connect_settings("http://connect:8083/", {
        "ksql.connect.url": "http://ignored:1", "ksql.connect.request.timeout.ms": "2500",
        "ksql.connect.basic.auth.credentials.source": "FILE",
        "ksql.connect.basic.auth.credentials.file": str(credentials)})
    assert chosen == ConnectSettings("http://connect:8083", 2.5, ("ops", "s3cret"))
    assert "s3cret" not in repr(chosen)


@pytest.mark.parametrize(("url", "properties", "message"), [
    ("ftp://x", {}, "must be an http:// or https:// URL"),
    ("http://user:pw@x:8083", {}, "without credentials"),
    (None, {"ksql.connect.request.timeout.ms": "soon"}, "a number of milliseconds"),
    (None, {"ksql.connect.basic.auth.credentials.source": "FILE"}, "cannot be empty"),
    (None, {"ksql.connect.basic.auth.credentials.source": "OAUTH"}, "must be NONE or FILE"),
])
def test_connect_settings_a_node_cannot_start_with(url: str | None, properties: dict[str, str],
                                                   message: str) -> None:
    with pytest.raises(ConnectSettingsError, match=message) as raised:
        connect_settings(url, properties)
    assert "pw" not in str(raised.value), "a URL's credentials are not shown"


def test_a_credentials_file_without_a_password_names_the_file_not_its_text(
        tmp_path: Path) -> None:
    credentials = tmp_path / "connect.properties"
    credentials.write_text("username=ops\npasswd=s3cret\n")
    with pytest.raises(ConnectSettingsError, match="must give username and password") as raised:
        connect_settings(None, {"ksql.connect.basic.auth.credentials.source": "FILE",
                                "ksql.connect.basic.auth.credentials.file": str(credentials)})
    assert "s3cret" not in str(raised.value)


@pytest.mark.parametrize("text", [
    "CREATE SOURCE CONNECTOR c WITH ('connector.class'='x', 'database.password' = 's3cret');",
    "CREATE SOURCE CONNECTOR c WITH ('connector.class'='x', \"pw\"=\"s3cret\");",
    "CREATE SINK CONNECTOR c WITH ('connector.class'='x', pw=s3cret);",
    "CREATE SINK CONNECTOR c WITH ('connector.class'='x', 'pw'='s3cret",
    "line 1:60: Syntax Error\nExpecting a property value, found 's3cret'\nStatement: CREATE "
    "SINK CONNECTOR c WITH ('pw'=s3cret);",
    "Illegal argument at Line: 1, Col: 25. Got: 's3cret' in CREATE SOURCE CONNECTOR ${x}",
])
def test_an_error_shows_a_create_connectors_values_masked_but_its_class(text: str) -> None:
    masked = masked_text(text)
    assert "s3cret" not in masked
    assert "'x'" in masked or "connector.class" not in text


def test_other_texts_are_shown_as_they_are() -> None:
    text = "CREATE STREAM S (A INT) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON'); found 'x'"
    assert masked_text(text) == text


def test_a_number_a_double_cannot_hold_is_refused() -> None:
    with pytest.raises(ParseError, match="Number overflows DOUBLE: 1e999"):
        parse("CREATE SOURCE CONNECTOR c WITH ('connector.class'='x', 'n'=1e999);")
