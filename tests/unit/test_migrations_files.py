"""``metastore migrations`` without a server: file names, order and checksums, the properties
file, a migration's statements (splitting, the kinds allowed, variables), which migrations apply
selects, the metadata's SQL, how a migration's statements are sent (through a fake store), and
the version chain that apply and validate follow (through a fake table)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cli.migrations import files
from cli.migrations.apply import Applier, ApplyTarget, select_migrations
from cli.migrations.config import initial_properties, load_config
from cli.migrations.errors import FAILED, USAGE, MigrationError
from cli.migrations.metadata import (
    NONE_VERSION,
    MetadataStore,
    MigrationState,
    StateChange,
    VersionInfo,
    create_stream_sql,
    create_table_sql,
    format_timestamp,
)
from cli.migrations.properties import parse_properties
from cli.migrations.statements import check_supported, parse_command, parse_defines, split_sql
from cli.migrations.validation import validate
from metastore.sql.parser import parse
from metastore.sql.statements import CreateAsSelect, CreateSource


def _project(tmp_path: Path, *names: str) -> Path:
    directory = tmp_path / "migrations"
    directory.mkdir()
    for name in names:
        (directory / name).write_text(f"-- {name}\n", encoding="utf-8")
    return directory


# -- names, order, checksums ----------------------------------------------------------------------
def test_file_names_follow_ksqldb_convention() -> None:
    assert files.file_name(2, "Add users") == "V000002__Add_users.sql"
    assert files.file_name(12, 'a/b\\c:d*e?f"g<h>i|j\tk') == "V000012__a_b_c_d_e_f_g_h_i_j_k.sql"
    parsed = files.parse_file_name(Path("m"), "V000003__Add_orders_table.sql")
    assert parsed == files.MigrationFile(3, "Add orders table", Path("m/V000003__Add_orders_table.sql"))
    assert files.parse_file_name(Path("m"), "V3__short.sql") is None
    assert files.parse_file_name(Path("m"), "notes.txt") is None
    with pytest.raises(MigrationError, match="must be positive"):
        files.parse_file_name(Path("m"), "V000000__zero.sql")


def test_migrations_are_ordered_by_name_and_versions_unique(tmp_path: Path) -> None:
    directory = _project(tmp_path, "V000010__ten.sql", "V000002__two.sql", "README.md",
                         "V000001__one.sql")
    assert [m.version for m in files.all_migrations(directory)] == [1, 2, 10]
    assert files.migration_for_version(2, directory) == files.MigrationFile(
        2, "two", directory / "V000002__two.sql")
    assert files.migration_for_version(3, directory) is None
    (directory / "V000002__again.sql").write_text("")
    with pytest.raises(MigrationError, match="multiple migration files with the same version"):
        files.all_migrations(directory)
    with pytest.raises(MigrationError, match="is not a directory"):
        files.all_migrations(tmp_path / "missing")


def test_checksum_is_md5_of_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / "V000001__x.sql"
    path.write_bytes(b"CREATE STREAM S (A INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');\r\n")
    assert files.checksum(path) == hashlib.md5(path.read_bytes()).hexdigest()
    path.write_bytes(b"")
    assert files.checksum(path) == "d41d8cd98f00b204e9800998ecf8427e"


def test_create_takes_the_next_version_or_the_given_one(tmp_path: Path) -> None:
    directory = _project(tmp_path)
    assert files.create_migration(directory, "Initial setup", None).path.name == \
        "V000001__Initial_setup.sql"
    assert files.create_migration(directory, "Add users", None).version == 2
    assert files.create_migration(directory, "Later", 7).path.name == "V000007__Later.sql"
    assert files.create_migration(directory, "After", None).version == 8
    assert (directory / "V000008__After.sql").read_text() == ""
    with pytest.raises(MigrationError, match="existing migrations file for version 7"):
        files.create_migration(directory, "Again", 7)
    with pytest.raises(MigrationError) as out_of_range:
        files.create_migration(directory, "Big", 1_000_000)
    assert out_of_range.value.exit_code == USAGE
    files.create_migration(directory, "Last", 999_999)
    with pytest.raises(MigrationError, match="six-digit"):
        files.create_migration(directory, "Too many", None)


def test_new_project_layout(tmp_path: Path) -> None:
    config_file = files.new_project(tmp_path / "proj", "http://localhost:8088")
    assert config_file == tmp_path / "proj" / "ksql-migrations.properties"
    assert (tmp_path / "proj" / "migrations").is_dir()
    assert parse_properties(config_file.read_text()) == {"ksql.server.url": "http://localhost:8088"}
    assert "# ksql.migrations.topic.replicas=1" in config_file.read_text()
    with pytest.raises(MigrationError, match="File already exists"):
        files.new_project(tmp_path / "proj", "http://localhost:8088")


# -- the properties file ------------------------------------------------------------------------
def test_java_properties_format() -> None:
    text = ("# comment\n! also a comment\n  a = 1\nb:2\nc 3\nd=long \\\n    value\n"
            "e=tab\\there \\u0041\nf\\=g=h\n\nempty=\nb=again\n")
    assert parse_properties(text) == {"a": "1", "b": "again", "c": "3", "d": "long value",
                                      "e": "tab\there A", "f=g": "h", "empty": ""}


def test_config_defaults_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "ksql-migrations.properties"
    path.write_text("ksql.server.url=http://localhost:8088/\n")
    config = load_config(path)
    assert (config.server_url, config.stream_name, config.table_name, config.replicas) == (
        "http://localhost:8088", "MIGRATION_EVENTS", "MIGRATION_SCHEMA_VERSIONS", 1)
    assert config.stream_topic("default_") == "default_ksql_MIGRATION_EVENTS"
    assert config.table_topic("default_") == "default_ksql_MIGRATION_SCHEMA_VERSIONS"
    assert config.migrations_dir == tmp_path / "migrations"
    assert config.basic_auth is None
    path.write_text("ksql.server.url=http://h:1\nksql.migrations.stream.name=EV\n"
                    "ksql.migrations.table.topic.name=tt\nksql.migrations.topic.replicas=3\n"
                    "ksql.migrations.dir.override=/elsewhere\nksql.auth.basic.username=u\n"
                    "ksql.auth.basic.password=p\nssl.truststore.location=/ignored/over/http\n")
    config = load_config(path)
    assert config.stream_topic("svc") == "svcksql_EV"
    assert config.table_topic("svc") == "tt"
    assert config.replicas == 3
    assert config.migrations_dir == Path("/elsewhere")
    assert config.basic_auth == ("u", "p")


@pytest.mark.parametrize(("text", "message"), [
    ("ksql.migrations.stream.name=X\n", "Missing required property: ksql.server.url"),
    ("ksql.server.url=localhost:8088\n", "Invalid ksql server URL"),
    ("ksql.server.url=http://h:1\nksql.migrations.topic.replicas=two\n", "Not a number"),
    ("ksql.server.url=https://h:1\nssl.truststore.location=/t.jks\n", "TLS settings"),
    ("ksql.server.url=http://h:1\nbearer.auth.issuer.endpoint.url=http://idp\n", "OAuth"),
    ("ksql.server.url=http://h:1\njava.home=/x\n", "blacklisted"),
])
def test_invalid_configs_are_usage_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "ksql-migrations.properties"
    path.write_text(text)
    with pytest.raises(MigrationError, match=message) as refused:
        load_config(path)
    assert refused.value.exit_code == USAGE


def test_initial_properties_name_every_key() -> None:
    text = initial_properties("http://localhost:8088")
    for key in ("ksql.migrations.stream.name", "ksql.migrations.table.name",
                "ksql.migrations.stream.topic.name", "ksql.migrations.table.topic.name",
                "ksql.migrations.topic.replicas", "ssl.truststore.location", "ssl.alpn",
                "ksql.auth.basic.username", "ksql.auth.basic.password",
                "ksql.migrations.dir.override"):
        assert f"# {key}=" in text


# -- a migration's statements -------------------------------------------------------------------
def test_split_sql_drops_comments_and_keeps_strings() -> None:
    text = ("-- a comment; with a semicolon\nCREATE STREAM S (A STRING) WITH (KAFKA_TOPIC='s;t',"
            " VALUE_FORMAT='JSON');/* block; */INSERT INTO S (A) VALUES ('it''s');\n"
            "-- trailing comment")
    assert split_sql(text) == [
        "CREATE STREAM S (A STRING) WITH (KAFKA_TOPIC='s;t', VALUE_FORMAT='JSON');",
        "INSERT INTO S (A) VALUES ('it''s');"]
    with pytest.raises(MigrationError, match="missing semicolon"):
        split_sql("CREATE STREAM S (A INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON')")
    with pytest.raises(MigrationError, match="closing token"):
        split_sql("INSERT INTO S (A) VALUES ('open);")


@pytest.mark.parametrize("statement", [
    "SELECT * FROM T WHERE K = 1;", "  select * from S emit changes;", "SHOW STREAMS;",
    "LIST TABLES;", "DESCRIBE S;", "EXPLAIN Q1;", "PRINT 't';", "RUN SCRIPT 'x.sql';"])
def test_queries_and_listings_are_refused(statement: str) -> None:
    with pytest.raises(MigrationError, match="statements are not supported"):
        check_supported(statement)


@pytest.mark.parametrize("statement", [
    "CREATE STREAM S (A INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON', PARTITIONS=1);",
    "CREATE TABLE T AS SELECT A, COUNT(*) AS N FROM S GROUP BY A;",
    "INSERT INTO S (A) VALUES (1);", "DROP STREAM S;", "TERMINATE CTAS_T_1;", "SET 'a'='b';",
    "UNSET 'a';", "DEFINE x='1';", "UNDEFINE x;", "CREATE TYPE ADDRESS AS STRUCT<N INT>;"])
def test_ddl_dml_and_session_statements_are_allowed(statement: str) -> None:
    assert parse_command(statement, {}).statement is not None


def test_variables_are_substituted_and_parse_errors_named() -> None:
    parsed = parse_command("INSERT INTO ${s} (A) VALUES ('${v}');", {"s": "S1", "v": "x"})
    assert parsed.text == "INSERT INTO S1 (A) VALUES ('x');"
    with pytest.raises(MigrationError, match="Failed to parse the statement"):
        parse_command("CREATE STREM S;", {})
    assert parse_defines(["a=1", "b=two"]) == {"a": "1", "b": "two"}
    for bad in ("a", "a=", "a=b=c"):
        with pytest.raises(MigrationError, match="must be defined using '='"):
            parse_defines([bad])


# -- which migrations apply takes -----------------------------------------------------------------
def test_select_migrations(tmp_path: Path) -> None:
    directory = _project(tmp_path, "V000001__a.sql", "V000002__b.sql", "V000003__c.sql")

    def versions(previous: str, target: ApplyTarget) -> list[int]:
        return [m.version for m in select_migrations(directory, previous, target)]

    assert versions(NONE_VERSION, ApplyTarget(all=True)) == [1, 2, 3]
    assert versions("1", ApplyTarget(next=True)) == [2]
    assert versions(NONE_VERSION, ApplyTarget(until=2)) == [1, 2]
    assert versions("1", ApplyTarget(version=3)) == [3]
    assert versions("3", ApplyTarget(all=True)) == []
    with pytest.raises(MigrationError, match="No eligible migrations"):
        versions("3", ApplyTarget(next=True))
    with pytest.raises(MigrationError, match="newer than the last version migrated"):
        versions("2", ApplyTarget(version=1))
    with pytest.raises(MigrationError, match="No migration file with version 9"):
        versions("2", ApplyTarget(version=9))
    with pytest.raises(MigrationError, match="Exactly one of"):
        ApplyTarget(all=True, next=True).check()


# -- the metadata -------------------------------------------------------------------------------
def test_metadata_statements_parse_as_ksqldb_writes_them() -> None:
    [stream] = parse(create_stream_sql("MIGRATION_EVENTS", "default_ksql_MIGRATION_EVENTS", 3))
    assert isinstance(stream, CreateSource)
    assert stream.text.count("STRING") == 9 and "REPLICAS=3" in stream.text
    assert "VALUE_FORMAT='JSON'" in stream.text and "PARTITIONS=1" in stream.text
    [table] = parse(create_table_sql("MIGRATION_SCHEMA_VERSIONS", "MIGRATION_EVENTS", "t"))
    assert isinstance(table, CreateAsSelect)
    assert table.text.count("latest_by_offset(") == 8 and "GROUP BY version_key" in table.text


def test_version_rows() -> None:
    info = VersionInfo.from_row(["2", "abc", "1", "MIGRATED", "Add users", "1700000000123",
                                 "1700000000456", "N/A"])
    assert (info.version, info.state, info.previous) == (2, MigrationState.MIGRATED, "1")
    assert format_timestamp("1700000000123").count(".123 ") == 1
    assert format_timestamp("") == "" and format_timestamp("N/A") == "N/A"
    assert info.as_json()["startedOnEpochMs"] == 1700000000123
    pending = VersionInfo.pending(files.MigrationFile(3, "Add orders", Path("x")))
    assert (pending.state, pending.started_on, pending.previous) == (MigrationState.PENDING,
                                                                     "N/A", "N/A")


# -- applying, with a fake store ------------------------------------------------------------------
class _FakeServer:
    def __init__(self, refuse: str | None = None) -> None:
        self.sent: list[tuple[str, dict[str, Any], dict[str, str]]] = []
        self.refuse = refuse

    def execute(self, text: str, failure: str = "", properties: Any = None,
                variables: Any = None) -> list[dict[str, Any]]:
        if self.refuse and self.refuse in text:
            raise MigrationError("refused by the server")
        self.sent.append((text, dict(properties or {}), dict(variables or {})))
        return []


class _FakeStore:
    def __init__(self, server: _FakeServer) -> None:
        self.server = server
        self.records: list[StateChange] = []

    def latest_migrated_version(self) -> str:
        return NONE_VERSION

    def wait_until_migrated(self, version: str) -> None:
        pass

    def wait_for_state(self, version: str, state: MigrationState) -> None:
        pass

    def record(self, change: StateChange) -> None:
        self.records.append(change)


MIGRATION = """DEFINE topic='orders';
SET 'auto.offset.reset'='earliest';
CREATE STREAM ORDERS (ID INT KEY) WITH (KAFKA_TOPIC='${topic}', VALUE_FORMAT='JSON', PARTITIONS=1);
UNSET 'auto.offset.reset';
UNDEFINE topic;
INSERT INTO ORDERS (ID) VALUES (${id});
"""


def test_apply_sends_statements_with_their_properties_and_variables(tmp_path: Path) -> None:
    directory = _project(tmp_path)
    (directory / "V000001__Orders.sql").write_text(MIGRATION)
    store = _FakeStore(_FakeServer())
    Applier(store, directory, {"id": "7"}, dry_run=False, clock=lambda: 1000).apply(  # type: ignore[arg-type]
        ApplyTarget(all=True))
    assert store.server.sent == [
        ("CREATE STREAM ORDERS (ID INT KEY) WITH (KAFKA_TOPIC='orders', VALUE_FORMAT='JSON', "
         "PARTITIONS=1);", {"auto.offset.reset": "earliest"}, {"id": "7", "topic": "orders"}),
        ("INSERT INTO ORDERS (ID) VALUES (7);", {}, {"id": "7"})]
    assert [r.state for r in store.records] == [MigrationState.RUNNING, MigrationState.MIGRATED]
    running, migrated = store.records
    assert running.completed_on == "" and migrated.completed_on == "1000"
    assert migrated.checksum == files.checksum(directory / "V000001__Orders.sql")
    assert migrated.previous == NONE_VERSION


def test_a_file_that_does_not_parse_runs_nothing_and_records_error(tmp_path: Path) -> None:
    directory = _project(tmp_path)
    (directory / "V000001__Bad.sql").write_text(
        "CREATE STREAM A (ID INT) WITH (KAFKA_TOPIC='a', VALUE_FORMAT='JSON');\nSELECT * FROM A;\n")
    store = _FakeStore(_FakeServer())
    with pytest.raises(MigrationError, match="Failed to parse sql: SELECT") as failed:
        Applier(store, directory, {}, dry_run=False).apply(ApplyTarget(next=True))  # type: ignore[arg-type]
    assert failed.value.exit_code == FAILED
    assert store.server.sent == []
    assert [r.state for r in store.records] == [MigrationState.RUNNING, MigrationState.ERROR]
    assert "'SELECT' statements are not supported" in store.records[-1].error_reason


def test_a_refused_statement_records_error_and_stops(tmp_path: Path) -> None:
    directory = _project(tmp_path)
    (directory / "V000001__Two.sql").write_text(
        "CREATE TYPE T1 AS STRUCT<A INT>;\nCREATE TYPE T2 AS STRUCT<A INT>;\n"
        "CREATE TYPE T3 AS STRUCT<A INT>;\n")
    store = _FakeStore(_FakeServer(refuse="T2"))
    with pytest.raises(MigrationError, match="Failed to execute sql: CREATE TYPE T2"):
        Applier(store, directory, {}, dry_run=False).apply(ApplyTarget(all=True))  # type: ignore[arg-type]
    assert [text for text, _, _ in store.server.sent] == ["CREATE TYPE T1 AS STRUCT<A INT>;"]
    assert store.records[-1].state is MigrationState.ERROR
    assert "refused by the server" in store.records[-1].error_reason


def test_dry_run_sends_and_records_nothing(tmp_path: Path) -> None:
    directory = _project(tmp_path)
    (directory / "V000001__Orders.sql").write_text(MIGRATION)
    store = _FakeStore(_FakeServer())
    applier = Applier(store, directory, {}, dry_run=True)  # type: ignore[arg-type]
    applier.apply(ApplyTarget(all=True))
    assert store.server.sent == [] and store.records == []
    assert [o.state for o in applier.outcomes] == [MigrationState.PENDING]



# -- the version chain, with a fake table -------------------------------------------------------
class _FakeTable:
    """A server whose pull queries are answered from ``records`` (version_key to columns)."""

    def __init__(self, records: dict[str, list[str]]) -> None:
        self.records = records
        self.config = SimpleNamespace(stream_name="EV", table_name="VERSIONS")

    def rows(self, query: str, failure: str) -> list[list[str]]:
        keys = re.findall(r"'([^']*)'", query.split("WHERE", 1)[1])
        found = [self.records[key] for key in keys if key in self.records]
        return [row[:1] for row in found] if query.startswith("SELECT version ") else found


def _row(version: int, state: str, previous: str, checksum: str = "x") -> list[str]:
    return [str(version), checksum, previous, state, f"v{version}", "1", "2", "N/A"]


def test_the_last_migrated_version_skips_a_failed_or_running_current() -> None:
    migrated = {"1": _row(1, "MIGRATED", "<none>"), "2": _row(2, "MIGRATED", "1")}
    store = MetadataStore(_FakeTable({**migrated, "CURRENT": _row(2, "MIGRATED", "1")}))  # type: ignore[arg-type]
    assert store.current_version() == "2" and store.latest_migrated_version() == "2"
    failed = {**migrated, "3": _row(3, "ERROR", "2"), "CURRENT": _row(3, "ERROR", "2")}
    assert MetadataStore(_FakeTable(failed)).latest_migrated_version() == "2"  # type: ignore[arg-type]
    first_failed = {"1": _row(1, "RUNNING", "<none>"), "CURRENT": _row(1, "RUNNING", "<none>")}
    assert MetadataStore(_FakeTable(first_failed)).latest_migrated_version() == NONE_VERSION  # type: ignore[arg-type]
    broken = {"1": _row(1, "ERROR", "<none>"), "2": _row(2, "ERROR", "1"),
              "CURRENT": _row(2, "ERROR", "1")}
    with pytest.raises(MigrationError, match="previous version that does not have status MIGRATED"):
        MetadataStore(_FakeTable(broken)).latest_migrated_version()  # type: ignore[arg-type]
    assert MetadataStore(_FakeTable({})).latest_migrated_version() == NONE_VERSION  # type: ignore[arg-type]


def test_validation_follows_the_chain_and_compares_checksums(tmp_path: Path) -> None:
    directory = _project(tmp_path, "V000001__a.sql", "V000002__b.sql")
    sums = {v: files.checksum(directory / f"V00000{v}__{n}.sql") for v, n in ((1, "a"), (2, "b"))}
    records = {"1": _row(1, "MIGRATED", "<none>", sums[1]), "2": _row(2, "MIGRATED", "1", sums[2]),
               "CURRENT": _row(2, "MIGRATED", "1", sums[2])}
    result = validate(MetadataStore(_FakeTable(records)), directory)  # type: ignore[arg-type]
    assert result.valid and [c.version for c in result.checked] == ["2", "1"]
    (directory / "V000001__a.sql").write_text("changed")
    result = validate(MetadataStore(_FakeTable(records)), directory)  # type: ignore[arg-type]
    assert not result.valid and "does not match the checksum saved for this version" in str(
        result.error)
    (directory / "V000002__b.sql").unlink()
    result = validate(MetadataStore(_FakeTable(records)), directory)  # type: ignore[arg-type]
    assert result.error == "No migrations file found for version with status MIGRATED. Version: 2"
