"""``metastore shell`` without a node: its CLI commands recognized as ksqlDB's CLI recognizes
them, its startup options and config file, scripts split and run statement by statement, the
session's SET / UNSET / DEFINE reports, SPOOL, and tables fitted to the terminal."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cli.client import StatementFailedError
from cli.main import app
from cli.output import fitted_widths, print_table, table_row, tables_within
from cli.shell.commands import CliCommand, CommandError, Shell, execute, recognize
from cli.shell.console import Console, OutputFormat
from cli.shell.options import (
    OptionError,
    load_config_file,
    parse_defines,
    parse_output,
    parse_properties,
)
from cli.shell.script import Outcome, ScriptRunner, interrupted_after, statement_texts
from cli.shell.session import Session, SessionError
from cli.stream import print_rows


@pytest.mark.parametrize(("line", "command"), [
    ("help", CliCommand("help", ())),
    ("  HeLp ;", CliCommand("help", ())),
    ("spool off", CliCommand("spool", ("off",))),
    ("SPOOL 'my ''own'' file.txt';", CliCommand("spool", ("my 'own' file.txt",))),
    ("run script '/tmp/a b.sql';", CliCommand("run script", ("/tmp/a b.sql",))),
    ("RUN SCRIPT /tmp/x.sql", CliCommand("run script", ("/tmp/x.sql",))),
    ("server http://127.0.0.1:8089", CliCommand("server", ("http://127.0.0.1:8089",))),
    ("Output JSON;", CliCommand("output", ("JSON",))),
    ("exit", CliCommand("exit", ())),
    ("history", CliCommand("history", ())),
    ("version;", CliCommand("version", ())),
    ("clear", CliCommand("clear", ())),
])
def test_cli_commands_are_recognized_in_any_case(line: str, command: CliCommand) -> None:
    assert recognize(line) == command


@pytest.mark.parametrize("line", ["SELECT * FROM s;", "SHOW STREAMS;", "exiting", "",
                                  "SET 'auto.offset.reset' = 'earliest';", "servers"])
def test_sql_is_not_a_cli_command(line: str) -> None:
    assert recognize(line) is None


def test_a_command_with_the_wrong_number_of_arguments_shows_its_help() -> None:
    shell = Shell(Console(OutputFormat.TABULAR), None, None, None)  # type: ignore[arg-type]
    with pytest.raises(CommandError, match="Too many parameters\nhelp:"):
        execute(CliCommand("help", ("x",)), shell)
    with pytest.raises(CommandError, match="Too few parameters\nspool"):
        execute(CliCommand("spool", ()), shell)
    execute(CliCommand("exit", ()), shell)
    assert shell.exiting


def test_output_shows_and_changes_the_format(capsys: pytest.CaptureFixture[str]) -> None:
    shell = Shell(Console(OutputFormat.TABULAR), None, None, None)  # type: ignore[arg-type]
    for args in [(), ("json",), ("xml",)]:
        execute(CliCommand("output", args), shell)
    assert capsys.readouterr().out.splitlines() == [
        "Current output format: TABULAR", "Output format set to JSON",
        "Invalid output format: 'XML' (valid formats: 'JSON', 'TABULAR')"]
    assert shell.console.json


def test_defines_and_output_options() -> None:
    assert parse_defines(["a=1", "B=two words"]) == {"a": "1", "B": "two words"}
    with pytest.raises(OptionError, match="variables must be defined using '='"):
        parse_defines(["a=b=c"])
    assert parse_output("json") is OutputFormat.JSON
    with pytest.raises(OptionError, match="Invalid output format: 'yaml'"):
        parse_output("yaml")


def test_a_config_file_is_read_as_java_properties_without_the_client_side_ones(
        tmp_path: Path) -> None:
    assert parse_properties("# comment\n! also\n\n a = 1\nb:2\nc 3\nd=long \\\n   value\n"
                            "e=tab\\there\\u0021\nf\\=g=h\n") == {
        "a": "1", "b": "2", "c": "3", "d": "long value", "e": "tab\there!", "f=g": "h"}
    config = tmp_path / "cli.properties"
    config.write_text("ksql.streams.auto.offset.reset=earliest\nssl.truststore.location=/x\n"
                      "security.protocol=SSL\nsasl.mechanism=PLAIN\n")
    assert load_config_file(config) == {"ksql.streams.auto.offset.reset": "earliest"}
    with pytest.raises(OptionError, match="Failed to load properties file"):
        load_config_file(tmp_path / "missing.properties")


def test_scripts_are_split_into_statements_as_written() -> None:
    script = ("-- a comment\nCREATE STREAM S (ID INT KEY) WITH (KAFKA_TOPIC='a;b');\n"
              "SELECT * FROM ${src} EMIT CHANGES LIMIT 2;\n/* done */ SHOW STREAMS")
    assert statement_texts(script) == [
        "CREATE STREAM S (ID INT KEY) WITH (KAFKA_TOPIC='a;b');",
        "SELECT * FROM ${src} EMIT CHANGES LIMIT 2;", "SHOW STREAMS"]
    assert statement_texts("  \n") == []


def test_session_statements_report_as_ksqldb_cli() -> None:
    session = Session()
    assert session.set_property("auto.offset.reset", "earliest") == (
        "Successfully changed local property 'auto.offset.reset' to 'earliest'. Use the UNSET "
        "command to revert your change.")
    assert session.set_property("auto.offset.reset", "latest") == (
        "Successfully changed local property 'auto.offset.reset' from 'earliest' to 'latest'.")
    assert session.unset_property("auto.offset.reset") == (
        "Successfully unset local property 'auto.offset.reset' (value was 'latest').")
    with pytest.raises(SessionError, match="which was never set in the first place"):
        session.unset_property("auto.offset.reset")
    session.define("a", "x")
    assert session.undefine("A") is None
    assert session.undefine("a") == "Cannot undefine variable 'a' which was never defined."


class FakeClient:
    """The node's answers: every /ksql statement accepted but those naming BAD."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, dict[str, Any], dict[str, str]]] = []

    def ksql(self, text: str, properties: dict[str, Any],
             variables: dict[str, str]) -> list[dict[str, Any]]:
        self.sent.append(("ksql", text, dict(properties), dict(variables)))
        if "BAD" in text:
            raise StatementFailedError(40001, "BAD does not exist", {})
        return [{"@type": "currentStatus", "commandStatus": {"message": "Stream created"}}]

    def stream_query(self, text: str, properties: dict[str, Any],
                     variables: dict[str, str]) -> Iterator[Any]:
        self.sent.append(("query", text, dict(properties), dict(variables)))
        yield {"queryId": "q", "columnNames": ["ID"], "columnTypes": ["INTEGER"]}
        yield from ([n] for n in range(1, 100))


class FakeConnection:
    def __init__(self) -> None:
        self.client = FakeClient()
        self.checked: list[str] = []

    def check_property(self, name: str) -> None:
        self.checked.append(name)


def runner(session: Session) -> tuple[ScriptRunner, FakeConnection]:
    connection = FakeConnection()
    return ScriptRunner(session, connection, Console(OutputFormat.TABULAR)), connection  # type: ignore[arg-type]


def test_a_script_runs_statement_by_statement_and_stops_at_the_first_failure(
        capsys: pytest.CaptureFixture[str]) -> None:
    run, connection = runner(Session(row_limit=2))
    outcome = run.run("DEFINE t = 'S'; SET 'auto.offset.reset' = 'earliest';\n"
                      "CREATE STREAM ${t} (ID INT KEY) WITH (KAFKA_TOPIC='s');\n"
                      "SELECT * FROM ${t} EMIT CHANGES;\nDROP STREAM BAD;\nSHOW STREAMS;")
    assert outcome is Outcome.REJECTED
    properties, variables = {"auto.offset.reset": "earliest"}, {"t": "S"}
    assert connection.client.sent == [
        ("ksql", "CREATE STREAM ${t} (ID INT KEY) WITH (KAFKA_TOPIC='s');", properties, variables),
        ("query", "SELECT * FROM ${t} EMIT CHANGES;", properties, variables),
        ("ksql", "DROP STREAM BAD;", properties, variables)]
    assert connection.checked == ["auto.offset.reset"]
    printed = capsys.readouterr().out
    assert "Successfully changed local property 'auto.offset.reset' to 'earliest'" in printed
    assert "| 1 " in printed and "| 2 " in printed and "| 3 " not in printed
    assert "Query terminated" in printed and printed.endswith("Error 40001: BAD does not exist\n")


def test_show_variables_and_undefine_are_answered_by_the_session(
        capsys: pytest.CaptureFixture[str]) -> None:
    run, connection = runner(Session())
    assert run.run("DEFINE a = 'x'; SHOW VARIABLES; UNDEFINE b;") is Outcome.OK
    assert connection.client.sent == []
    printed = capsys.readouterr().out
    assert "| a             | x     |" in printed
    assert "Cannot undefine variable 'b' which was never defined." in printed


def test_spool_copies_the_output_and_the_lines_entered(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    console = Console(OutputFormat.TABULAR)
    spool = tmp_path / "session.txt"
    console.spool_to(spool)
    monkeypatch.setattr("builtins.input", lambda prompt: "SHOW STREAMS;")
    assert console.read_line(continued=False) == "SHOW STREAMS;"
    console.echo("shown")
    console.spool_off()
    console.echo("not spooled")
    assert spool.read_text() == (f"Session will be spooled to {spool}\nEnter SPOOL OFF to "
                                 "disable\nmetastore> SHOW STREAMS;\nshown\n")
    assert capsys.readouterr().out.endswith(f"shown\nSpool written to {spool}\nnot spooled\n")


def test_wide_tables_are_fitted_to_the_width_and_their_cells_wrapped(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert fitted_widths([4, 30, 50], 200) == [4, 30, 50]
    assert fitted_widths([4, 30, 50], 40) == [4, 13, 13]
    assert table_row(["id", "abcdefgh"], [2, 5], wrap=True) == ["| id | abcde |",
                                                                 "|    | fgh   |"]
    with tables_within(30):
        print_table(["Name", "Value"], [["k", "x" * 40]])
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 30 and len(lines) == 7


def test_a_query_stops_at_the_row_limit_or_the_timeout(
        capsys: pytest.CaptureFixture[str]) -> None:
    def rows() -> Iterator[Any]:
        yield {"columnNames": ["N"]}
        for n in range(10):
            yield [n]
            time.sleep(0.05)

    assert print_rows(rows(), json_output=False, row_limit=3) == 3
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt), interrupted_after(100):
        time.sleep(5)
    assert time.monotonic() - started < 2
    assert "Query terminated" in capsys.readouterr().out


def test_bad_startup_options_exit_2(tmp_path: Path) -> None:
    cli = CliRunner()
    script = tmp_path / "s.sql"
    script.write_text("SHOW STREAMS;")
    for args in (["--output", "yaml"], ["--define", "novalue"], ["-e", "SHOW STREAMS;", "-f",
                 str(script)], ["-f", str(tmp_path / "missing.sql")], ["--query-row-limit", "0"]):
        result = cli.invoke(app, ["shell", "-s", "http://127.0.0.1:1", *args])
        assert result.exit_code == 2, (args, result.output)
