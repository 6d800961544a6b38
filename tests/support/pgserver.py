"""A real PostgreSQL for the tests: testcontainers when a Docker engine answers, otherwise a private
server from the machine's PostgreSQL binaries (``initdb`` + ``pg_ctl``), in a temp folder, on a free
loopback port, with ``wal_level=logical``.

PostgreSQL refuses to run as root: as root the binaries run as the ``postgres`` system user, in a
folder that user owns (the tests themselves stay root).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from headwater.testing.names import free_port

__all__ = ["PostgresServer", "find_bindir", "start_postgres", "start_private_postgres"]

SETTINGS = {
    "wal_level": "logical",
    "max_replication_slots": "40",
    "max_wal_senders": "40",
    "fsync": "off",  # a test server: speed over durability of the test database itself
    "full_page_writes": "off",
}


@dataclass
class PostgresServer:
    """Where a running server listens and how to reach it as its superuser."""

    host: str
    port: int
    user: str = "postgres"
    password: str = ""
    dbname: str = "postgres"
    stop_server: Any = None
    notes: list[str] = field(default_factory=list)

    def dsn(self, dbname: str | None = None, **extra: str) -> str:
        parts = {"host": self.host, "port": str(self.port), "user": self.user, "dbname": dbname or self.dbname,
                 **({"password": self.password} if self.password else {}), **extra}
        return " ".join(f"{k}={v}" for k, v in parts.items())

    def new_database(self, prefix: str) -> str:
        """A database of the test's own, named ``<prefix>_<8 hex digits>``; its name."""
        import uuid

        import psycopg

        name = f"{prefix}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return name

    def drop_idle_slots(self) -> list[str]:
        """Drop the replication slots no connection uses (each in its own database, as Postgres requires for
        logical slots); returns their names."""
        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            idle = conn.execute("SELECT slot_name, database FROM pg_replication_slots WHERE NOT active").fetchall()
        for slot, database in idle:
            with psycopg.connect(self.dsn(database), autocommit=True) as conn:
                conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                             "WHERE slot_name = %s AND NOT active", (slot,))
        return [slot for slot, _ in idle]

    def stop(self) -> None:
        if self.stop_server is not None:
            self.stop_server()
            self.stop_server = None


def fetch_one(conn: Any, query: str, params: tuple[Any, ...] = ()) -> tuple[Any, ...]:
    """The one row ``query`` answers on the psycopg connection ``conn`` (AssertionError when it answers none)."""
    row = conn.execute(query, params).fetchone()
    assert row is not None, f"no row from {query}"
    return tuple(row)


def find_bindir() -> Path | None:
    """The folder of ``initdb``/``pg_ctl``/``postgres``: ``pg_config --bindir``, else Debian's layout."""
    candidates = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        if out.returncode == 0:
            candidates.append(out.stdout.strip())
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for folder in candidates:
        if (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    return None


def _from_docker() -> PostgresServer | None:
    try:
        from testcontainers.community.postgres import PostgresContainer
    except ImportError:
        try:
            from testcontainers.postgres import PostgresContainer
        except ImportError:
            return None
    try:
        container = PostgresContainer("postgres:15", username="postgres", password="postgres", dbname="postgres")
    except Exception:  # no Docker engine: the constructor asks the daemon and fails
        return None
    container.with_command("postgres " + " ".join(f"-c {k}={v}" for k, v in SETTINGS.items()))
    container.start()
    return PostgresServer(container.get_container_host_ip(), int(container.get_exposed_port(5432)),
                          password="postgres", stop_server=container.stop, notes=["testcontainers"])


def _from_binaries(base: Path, overrides: dict[str, str] | None = None, hba: list[str] | None = None,
                   files: dict[str, bytes] | None = None) -> PostgresServer:
    bindir = find_bindir()
    if bindir is None:
        raise RuntimeError("PostgreSQL server binaries not found (initdb, pg_ctl): install Debian's postgresql "
                           "package (.ci/run does)")
    as_root = os.geteuid() == 0
    run_as = ["runuser", "-u", "postgres", "--"] if as_root else []
    base.mkdir(parents=True, exist_ok=True)
    data, log = base / "pgdata", base / "postgres.log"
    if as_root:
        shutil.chown(base, "postgres", "postgres")
    subprocess.run([*run_as, str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E",
                    "UTF8", "--no-sync"], check=True, capture_output=True)
    port = free_port()
    settings = {**SETTINGS, **(overrides or {}), "listen_addresses": "'127.0.0.1'", "port": str(port),
                "unix_socket_directories": f"'{base}'"}
    with open(data / "postgresql.conf", "a") as conf:
        conf.writelines(f"{k} = {v}\n" for k, v in settings.items())
    for name, content in (files or {}).items():  # e.g. the server's certificate and key, 0600 as Postgres wants
        (data / name).write_bytes(content)
        (data / name).chmod(0o600)
        if as_root:
            shutil.chown(data / name, "postgres", "postgres")
    if hba is not None:  # pg_hba.conf replaced whole
        (data / "pg_hba.conf").write_text("".join(f"{line}\n" for line in hba))
    subprocess.run([*run_as, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60", "start"],
                   check=True, capture_output=True)

    def stop() -> None:
        subprocess.run([*run_as, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                       capture_output=True)
        shutil.rmtree(base, ignore_errors=True)

    return PostgresServer("127.0.0.1", port, stop_server=stop, notes=[f"local binaries in {bindir}"])


def start_private_postgres(settings: dict[str, str], hba: list[str], files: dict[str, bytes]) -> PostgresServer:
    """A private server from the machine's binaries (never Docker's) with postgresql.conf ``settings``, a
    pg_hba.conf of ``hba`` alone, and ``files`` written into its data folder (names relative to it)."""
    return _from_binaries(Path(tempfile.mkdtemp(prefix="headwater-pg-")), settings, hba, files)


def start_postgres(**overrides: str) -> PostgresServer:
    """A running server: Docker's when there is one, else a private one in a new temp folder (under
    the system's temp folder, which the postgres user can reach; pytest's sit under root's 0700).
    ``overrides``: postgresql.conf settings (a private server only, e.g. ``wal_level="replica"``)."""
    server = None if overrides else _from_docker()
    if server is not None:
        return server
    return _from_binaries(Path(tempfile.mkdtemp(prefix="headwater-pg-")), overrides)
