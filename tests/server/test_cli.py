"""The metastore CLI against a real node: output, --json, exit codes, log dump and verify, and
the shell as ksqlDB's CLI (-e, -f, SPOOL, OUTPUT, SERVER, HISTORY)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.kafka import unique
from tests.support.servers import ServerProcess

UNREACHABLE = "http://127.0.0.1:1"


def cli(*args: str, stdin: str | None = None,
        history: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``history``: the shell's history file (else the user's own)."""
    env = None if history is None else {**os.environ, "METASTORE_HISTORY_FILE": str(history)}
    return subprocess.run([sys.executable, "-m", "cli.main", *args], capture_output=True,
                          text=True, timeout=120, input=stdin, check=False, env=env)


def stream_ddl(name: str) -> str:
    return (f"CREATE STREAM {name} (ID INT KEY, V STRING) WITH (KAFKA_TOPIC='{name.lower()}', "
            "VALUE_FORMAT='JSON', PARTITIONS=1);")


def test_exec_list_describe_status(server: ServerProcess, tmp_path: Path) -> None:
    create = ("CREATE STREAM CLICKS (ID INT KEY, URL STRING) WITH (KAFKA_TOPIC='clicks-cli', "
              "VALUE_FORMAT='JSON', PARTITIONS=1);")
    result = cli("exec", create, "--server", server.url)
    assert result.returncode == 0, result.stderr
    assert "Stream created" in result.stdout

    listed = cli("list", "streams", "--server", server.url)
    assert listed.returncode == 0 and "CLICKS" in listed.stdout and "clicks-cli" in listed.stdout
    as_json = json.loads(cli("list", "streams", "--server", server.url, "--json").stdout)
    assert as_json[0]["streams"][0]["name"] == "CLICKS"

    described = cli("describe", "CLICKS", "--server", server.url)
    assert described.returncode == 0 and "INTEGER (KEY)" in described.stdout

    status = json.loads(cli("status", "--server", server.url, "--json").stdout)
    assert status["node"]["state"] == "READY"

    script = tmp_path / "script.sql"
    script.write_text("CREATE TABLE T AS SELECT URL, COUNT(*) AS N FROM CLICKS GROUP BY URL;\n"
                      "SHOW QUERIES;\n")
    ran = cli("run-script", str(script), "--server", server.url, "--json")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)[1]["queries"][0]["sinks"] == ["T"]


def test_exit_codes(server: ServerProcess) -> None:
    bad = cli("exec", "DROP STREAM NOPE;", "--server", server.url)
    assert bad.returncode == 1 and "40001" in bad.stderr and "does not exist" in bad.stderr
    unreachable = cli("exec", "SHOW STREAMS;", "--server", "http://127.0.0.1:1")
    assert unreachable.returncode == 2 and "cannot reach" in unreachable.stderr
    usage = cli("list", "everything", "--server", server.url)
    assert usage.returncode == 2


def test_shell_runs_multi_line_statements(server: ServerProcess) -> None:
    session = cli("shell", "--server", server.url,
                  stdin="CREATE STREAM SH (ID INT KEY)\n WITH (KAFKA_TOPIC='sh-cli', "
                        "VALUE_FORMAT='JSON', PARTITIONS=1);\nSHOW STREAMS;\nexit\n")
    assert session.returncode == 0, session.stderr
    assert "Stream created" in session.stdout and "SH" in session.stdout


def test_shell_runs_a_script_and_sends_a_select_to_the_query_endpoint(
        server: ServerProcess, tmp_path: Path) -> None:
    script = tmp_path / "it's.sql"
    script.write_text("CREATE STREAM RS (ID INT KEY) WITH (KAFKA_TOPIC='rs-cli', "
                      "VALUE_FORMAT='JSON', PARTITIONS=1);\n")
    quoted = str(script).replace("'", "''")
    session = cli("shell", "--server", server.url,
                  stdin=f"RUN SCRIPT '{quoted}';\nSHOW STREAMS;\nRUN SCRIPT '/nope.sql';\n"
                        "SELECT * FROM RS;\nexit\n")
    assert session.returncode == 0, session.stderr
    assert "Stream created" in session.stdout and "RS" in session.stdout
    assert "Error: cannot read /nope.sql" in session.stdout
    # a pull query goes to /query-stream, not /ksql: this node has no Spark to answer it
    assert "Error 50302" in session.stdout and "40002" not in session.stdout


def test_log_dump_and_verify_agree_with_the_node(server: ServerProcess, kafka_bootstrap: str) -> None:
    cli("exec", "CREATE TYPE ADDR AS STRUCT<STREET STRING>; DROP TYPE ADDR;", "--server", server.url)
    dumped = cli("log", "dump", "--bootstrap-servers", kafka_bootstrap, "--service-id",
                 server.service_id, "--json")
    assert dumped.returncode == 0, dumped.stderr
    assert [r["commandId"] for r in json.loads(dumped.stdout)] == ["type/ADDR/create",
                                                                   "type/ADDR/drop"]
    verified = cli("log", "verify", "--bootstrap-servers", kafka_bootstrap, "--service-id",
                   server.service_id, "--node", server.url, "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    report = json.loads(verified.stdout)
    assert report["node"]["agrees"] is True and report["badRecord"] is None


def test_the_log_dump_shows_who_wrote_each_statement_and_when(
        server_factory: Callable[..., ServerProcess], kafka_bootstrap: str,
        tmp_path: Path) -> None:
    users = tmp_path / "users"
    users.write_text("alice:wonderland\n")
    node = server_factory("--auth-file", str(users))
    written = cli("exec", "CREATE TYPE WHO AS STRUCT<NAME STRING>;", "--server", node.url,
                  "--user", "alice:wonderland")
    assert written.returncode == 0, written.stderr
    dump = ("log", "dump", "--bootstrap-servers", kafka_bootstrap, "--service-id",
            node.service_id, "--kafka", "client.id=audit")
    [record] = json.loads(cli(*dump, "--json").stdout)
    assert (record["commandId"], record["submitter"]) == ("type/WHO/create", "alice")
    assert abs(record["timestamp"] / 1000 - time.time()) < 300, "written just now"
    assert "wonderland" not in json.dumps(record), "the user, never the credentials"
    table = cli(*dump)
    assert table.returncode == 0 and "alice" in table.stdout and "Time (UTC)" in table.stdout


def test_a_query_command_in_the_log_carries_the_plan_every_node_runs(
        server: ServerProcess, kafka_bootstrap: str) -> None:
    created = cli("exec", "CREATE STREAM PL (ID INT KEY, V INT) WITH (KAFKA_TOPIC='pl-cli', "
                          "VALUE_FORMAT='JSON', PARTITIONS=1); CREATE STREAM PLANNED WITH "
                          "(KAFKA_TOPIC='planned-cli') AS SELECT ID, V FROM PL WHERE V > 1;",
                  "--server", server.url)
    assert created.returncode == 0, created.stderr
    dumped = json.loads(cli("log", "dump", "--bootstrap-servers", kafka_bootstrap,
                            "--service-id", server.service_id, "--json").stdout)
    [record] = [r for r in dumped if r["commandId"] == "stream/PLANNED/create"]
    plan = record["command"]["plan"]
    assert plan["format"] == 1 and plan["versions"]["QueryPlan"] == 4
    assert plan["plan"]["functions"] == ["json_fields", "kafka_int"]
    assert plan["plan"]["@"] == "QueryPlan" and plan["plan"]["topic"] == "planned-cli"
    assert "pl-cli" in [step.get("topic") for step in plan["plan"]["steps"]]
    assert record["command"]["querySql"].startswith("SELECT ID, V FROM PL WHERE")


def test_shell_file_stops_at_the_first_failure_and_execute_runs_each_statement(
        plain_node: ServerProcess, tmp_path: Path) -> None:
    first, second = unique("SHF").upper().replace("-", "_"), unique("SHG").upper().replace("-", "_")
    script = tmp_path / "script.sql"
    script.write_text(f"{stream_ddl(first)}\nDROP STREAM NOPE_{first};\n{stream_ddl(second)}\n")
    failed = cli("shell", "-s", plain_node.url, "-f", str(script))
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "Stream created" in failed.stdout and f"NOPE_{first}" in failed.stdout

    shown = cli("shell", "-s", plain_node.url, "-e", f"SHOW STREAMS; DESCRIBE {first}")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert first in shown.stdout and second not in shown.stdout
    assert "Key format" in shown.stdout


def test_shell_commands_spool_output_server_history(plain_node: ServerProcess,
                                                    tmp_path: Path) -> None:
    name = unique("SHC").upper().replace("-", "_")
    spool = tmp_path / "spooled.txt"
    session = cli("shell", "-s", plain_node.url, history=tmp_path / "history", stdin="\n".join([
        f"spool '{spool}'", "SET 'auto.offset.reset' = 'earliest';", stream_ddl(name),
        "OUTPUT JSON", f"DESCRIBE {name};", "spool off", "output", f"SERVER {UNREACHABLE}",
        "SHOW STREAMS;", f"server {plain_node.url}", "server", "HISTORY", "exit", ""]))
    assert session.returncode == 0, session.stderr
    out = session.stdout
    assert "Successfully changed local property 'auto.offset.reset' to 'earliest'." in out
    assert "Output format set to JSON" in out and "Current output format: JSON" in out
    assert f"Server now: {UNREACHABLE}" in out
    assert f"Remote server at {UNREACHABLE} does not appear to be a valid" in out
    assert f"Error: cannot reach {UNREACHABLE}" in out
    assert out.count(f"Server now: {plain_node.url}\n") == 1
    assert f"\nmetastore> {plain_node.url}\n" in out
    assert f"   1: spool '{spool}'" in out and "  12: HISTORY" in out
    spooled = spool.read_text()
    assert f"metastore> {stream_ddl(name)}\nStream created" in spooled
    described = json.loads(spooled[spooled.index("["):spooled.rindex("]") + 1])
    assert described[0]["sourceDescription"]["name"] == name
    assert "metastore> spool off" in spooled and "Current output format" not in spooled


def test_shell_names_an_unreachable_server() -> None:
    result = cli("shell", "-s", UNREACHABLE, "-e", "SHOW STREAMS")
    assert result.returncode == 2
    assert f"Remote server at {UNREACHABLE} does not appear to be a valid" in result.stdout
    assert f"Error: cannot reach {UNREACHABLE}" in result.stdout


def test_shell_file_runs_a_push_query_to_its_limit_between_statements(
        spark_node: ServerProcess, tmp_path: Path) -> None:
    name = unique("SHQ").upper().replace("-", "_")
    config = tmp_path / "cli.properties"
    config.write_text("# read the stream from its start\nauto.offset.reset=earliest\n")
    script = tmp_path / "script.sql"
    script.write_text(f"{stream_ddl(name)}\n"
                      "INSERT INTO ${s} (ID, V) VALUES (1, 'one');\n"
                      "INSERT INTO ${s} (ID, V) VALUES (2, 'two');\n"
                      "INSERT INTO ${s} (ID, V) VALUES (3, 'three');\n"
                      "SELECT ID, V FROM ${s} EMIT CHANGES LIMIT 2;\n"
                      "DESCRIBE ${s};\n")
    ran = cli("shell", "-s", spark_node.url, "-f", str(script), "--define", f"s={name}",
              "--config-file", str(config), "--query-timeout", "90000")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    out = ran.stdout
    queried, described = out.split("2 row(s)\n")
    rows = [[cell.strip() for cell in line.strip("|").split("|")]
            for line in queried.splitlines() if line.startswith("| ")]
    assert rows == [["ID", "V"], ["1", "one"], ["2", "two"]]
    assert f"Name                 : {name}" in described


def test_an_interactive_shell_on_a_terminal(plain_node: ServerProcess, tmp_path: Path) -> None:
    """The shell as a user meets it: a terminal (pexpect's pseudo-terminal), its prompts, a
    statement over two lines, the CLI's commands, the history of an earlier session."""
    import pexpect

    name = unique("TTY").upper().replace("-", "_")
    env = {**os.environ, "METASTORE_HISTORY_FILE": str(tmp_path / "history")}
    shell = pexpect.spawn(sys.executable, ["-m", "cli.main", "shell", "-s", plain_node.url],
                          env=env, encoding="utf-8", timeout=60, dimensions=(40, 120))
    shell.expect_exact("metastore> ")
    shell.sendline(f"CREATE STREAM {name} (ID INT KEY, V STRING)")
    shell.expect_exact("        -> ")  # the statement goes on until its ';'
    shell.sendline(f"WITH (KAFKA_TOPIC='{name.lower()}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    shell.expect_exact("Stream created")
    shell.sendline("OUTPUT JSON")
    shell.expect_exact("Output format set to JSON")
    shell.sendline(f"DESCRIBE {name};")
    shell.expect_exact(f'"name": "{name}"')
    shell.sendline("exit")
    shell.expect(pexpect.EOF)
    shell.close()
    assert shell.exitstatus == 0

    again = pexpect.spawn(sys.executable, ["-m", "cli.main", "shell", "-s", plain_node.url],
                          env=env, encoding="utf-8", timeout=60)
    again.expect_exact("metastore> ")
    again.sendline("HISTORY")
    again.expect_exact(f"DESCRIBE {name};")  # kept from the session before
    again.sendeof()
    again.expect(pexpect.EOF)
