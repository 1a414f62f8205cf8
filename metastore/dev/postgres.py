"""A local PostgreSQL server on 127.0.0.1, for the change-data-capture walkthrough.

The launcher runs the PostgreSQL the machine has (Debian's ``postgresql`` package: ``initdb``
and ``postgres`` on the PATH or under ``/usr/lib/postgresql/<version>/bin``), never one of its
own: :class:`LocalPostgres` makes a cluster under ``<root>/data`` the first time (superuser
``postgres``, trust authentication on 127.0.0.1 only, UTF-8), and starts its server with logical
decoding on (``wal_level=logical``, what Debezium's ``pgoutput`` reads), its socket in the root,
its port and pid in ``postgres.json`` and its log in ``postgres.log``. PostgreSQL refuses to run
as root: a launcher running as root runs it as the ``postgres`` user (``setpriv``), which owns
the root. Readiness is the server's own answer to ``SELECT 1`` through ``psql``.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import TextIO

from metastore.dev.exceptions import LocalInfraError, ToolMissingError
from metastore.dev.kafka_cluster import free_ports
from metastore.dev.local_service import LocalService, ServiceState, say

SUPERUSER = "postgres"
DATABASE = "postgres"
SERVICE_USER = "postgres"
"""The system user a root launcher runs PostgreSQL as (Debian's package creates it)."""
HINT = "Install PostgreSQL (Debian: apt-get install postgresql postgresql-client)."


class PostgresStartError(LocalInfraError):
    """The local PostgreSQL did not start, or not in time."""

    code = "postgres_start"


class PostgresState(ServiceState):
    @property
    def url(self) -> str:
        """A JDBC-style address of the server (Debezium takes host and port apart)."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{DATABASE}"


def binary(name: str) -> str:
    """A PostgreSQL server program: on the PATH, else the newest of Debian's versions."""
    found = shutil.which(name) or next(iter(sorted(
        glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None)
    if found is None:
        raise ToolMissingError(name, HINT)
    return found


def psql(state: ServiceState, sql: str, timeout: float = 30.0) -> str:
    """``sql`` run by ``psql`` on the server at ``state`` as the superuser; its output (tuples
    only, unaligned). A failing statement raises :class:`PostgresStartError` with psql's reason."""
    client = shutil.which("psql")
    if client is None:
        raise ToolMissingError("psql", HINT)
    done = subprocess.run([client, "-h", "127.0.0.1", "-p", str(state.port), "-U", SUPERUSER,
                           "-d", DATABASE, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", sql],
                          capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, "PGCONNECT_TIMEOUT": "3"})
    if done.returncode != 0:
        raise PostgresStartError(f"psql failed: {done.stderr.strip()[:500]}")
    return done.stdout


class LocalPostgres(LocalService[PostgresState]):
    """One PostgreSQL server process under ``root`` (its cluster in ``root/data``)."""

    title = "PostgreSQL"
    file_stem = "postgres"
    start_error = PostgresStartError
    state_type = PostgresState
    stop_signal = signal.SIGINT
    """PostgreSQL's fast shutdown: SIGTERM's smart one waits for every session (Debezium's)."""

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def start(self, progress: TextIO | None = sys.stderr, timeout: float = 60.0) -> PostgresState:
        """Start the server (or return it when it runs) once it answers a query; the cluster
        is made the first time."""
        existing = self.state()
        if existing is not None and self.is_running():
            return existing
        self.stop()
        self._own_root()
        if not (self.data_dir / "PG_VERSION").exists():
            say(progress, f"Making a PostgreSQL cluster in {self.data_dir}...")
            self._initdb()
        [port] = free_ports(1)
        say(progress, f"Starting PostgreSQL on 127.0.0.1:{port}...")
        command = [*self._as_service_user(), binary("postgres"), "-D", str(self.data_dir),
                   "-p", str(port), "-k", str(self.root), "-c", "listen_addresses=127.0.0.1",
                   "-c", "wal_level=logical", "-c", "max_wal_senders=8",
                   "-c", "max_replication_slots=8", "-c", "fsync=off"]
        return self.launch(command, PostgresState(port), progress, timeout)

    def answers(self, state: PostgresState) -> bool:
        try:
            return psql(state, "SELECT 1", timeout=5).strip() == "1"
        except (PostgresStartError, subprocess.TimeoutExpired):
            return False

    def _initdb(self) -> None:
        done = subprocess.run([*self._as_service_user(), binary("initdb"), "-D",
                               str(self.data_dir), "-U", SUPERUSER, "--auth=trust",
                               "-E", "UTF8", "--locale=C"],
                              capture_output=True, text=True, check=False, timeout=120)
        if done.returncode != 0:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            raise PostgresStartError(f"initdb failed: {(done.stderr or done.stdout)[-800:]}")

    def _own_root(self) -> None:
        """The root, owned by the service user when the launcher is root."""
        self.root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.root, SERVICE_USER, SERVICE_USER)

    @staticmethod
    def _as_service_user() -> list[str]:
        if os.geteuid() != 0:
            return []
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            raise ToolMissingError("setpriv", "Install util-linux, or run as a user other than "
                                              "root.")
        return [setpriv, f"--reuid={SERVICE_USER}", f"--regid={SERVICE_USER}", "--init-groups"]


__all__ = ["LocalPostgres", "PostgresStartError", "PostgresState", "psql"]
