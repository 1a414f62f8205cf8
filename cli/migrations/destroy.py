"""``destroy-metadata``: the metadata table (its query terminated first) and stream dropped with
their topics, each skipped when it does not exist, as ksqlDB's ``DestroyMigrationsCommand``."""

from __future__ import annotations

import logging

from cli.migrations.connection import Server
from cli.migrations.errors import MigrationError

log = logging.getLogger("cli.migrations")


def destroy_metadata(server: Server) -> None:
    log.info("Cleaning migrations metadata stream and table from ksqlDB server")
    server.service_id()  # an unreachable server is said so before anything else
    config = server.config
    if _exists(server, config.table_name, "table"):
        _terminate_writer(server, config.table_name)
        _drop(server, config.table_name, "table")
    else:
        log.info("Metadata table does not exist. Skipping cleanup.")
    if _exists(server, config.stream_name, "stream"):
        _drop(server, config.stream_name, "stream")
    else:
        log.info("Metadata stream does not exist. Skipping cleanup.")
    log.info("Migrations metadata cleaned successfully")


def _exists(server: Server, name: str, kind: str) -> bool:
    [listed] = server.execute(f"SHOW {kind.upper()}S;",
                              f"Failed to check for presence of metadata {kind} '{name}'")
    return any(str(source.get("name", "")).lower() == name.lower()
               for source in listed.get(f"{kind}s") or [])


def _terminate_writer(server: Server, table: str) -> None:
    [described] = server.execute(f"DESCRIBE {table};",
                                 f"Failed to describe metadata table '{table}'")
    queries = [str(query["id"]) for query in
               described.get("sourceDescription", {}).get("writeQueries") or []]
    log.info("Found %d query(ies) writing to the metadata table", len(queries))
    if len(queries) > 1:
        raise MigrationError("Found multiple queries writing to the metadata table. Query IDs: "
                             + ", ".join(f"'{query}'" for query in queries) + ".")
    for query in queries:
        log.info("Terminating query with ID: %s", query)
        server.execute(f"TERMINATE {query};", "Failed to terminate query populating metadata "
                       f"table. Query ID: {query}. Error")


def _drop(server: Server, name: str, kind: str) -> None:
    log.info("Dropping migrations metadata %s: %s", kind, name)
    server.execute(f"DROP {kind.upper()} {name} DELETE TOPIC;",
                   f"Failed to drop metadata {kind} '{name}'")
