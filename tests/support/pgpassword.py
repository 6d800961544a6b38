"""A PostgreSQL that checks passwords (scram-sha-256 on every TCP line but the superuser's), with a role of
``PASSWORD_USER`` and a database holding a one-row table ``items``: a connector given a wrong password fails
to connect, so one that streams proves the password reached it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import psycopg

from .pgserver import PostgresServer, start_private_postgres

__all__ = ["PASSWORD_USER", "PasswordPostgres", "start_password_postgres", "walsenders"]

PASSWORD_USER = "cdc_secret"


@dataclass
class PasswordPostgres:
    server: PostgresServer
    password: str  # PASSWORD_USER's
    database: str

    def cdc_source(self, prefix: str, password: str, **extra: str) -> dict[str, str]:
        """A Debezium source config for ``items`` as PASSWORD_USER with ``password`` (a placeholder, say)."""
        return {"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                "database.hostname": "127.0.0.1", "database.port": str(self.server.port),
                "database.user": PASSWORD_USER, "database.password": password, "database.dbname": self.database,
                "topic.prefix": prefix, "slot.name": f"slot_{uuid.uuid4().hex[:8]}",
                "publication.name": f"pub_{uuid.uuid4().hex[:6]}", "slot.drop.on.stop": "true",
                "key.converter": "org.apache.kafka.connect.json.JsonConverter",
                "key.converter.schemas.enable": "false",
                "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                "value.converter.schemas.enable": "false", **extra}

    def stop(self) -> None:
        self.server.stop()


def start_password_postgres(password: str) -> PasswordPostgres:
    server = start_private_postgres({"password_encryption": "'scram-sha-256'"},
                                    hba=["host all postgres 127.0.0.1/32 trust",  # the tests' own setup connections
                                         "host all all 127.0.0.1/32 scram-sha-256"], files={})
    try:
        database = "sec_" + uuid.uuid4().hex[:8]
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {PASSWORD_USER} LOGIN SUPERUSER PASSWORD '{password}'")
            conn.execute(f"CREATE DATABASE {database}")
        with psycopg.connect(server.dsn(database), autocommit=True) as db:
            db.execute("CREATE TABLE items (id int PRIMARY KEY, name text)")
            db.execute("INSERT INTO items VALUES (1, 'one')")
    except Exception:
        server.stop()
        raise
    return PasswordPostgres(server, password, database)


def walsenders(server: PostgresServer, prefix: str) -> set[int]:
    """The pids of a CDC source's replication connections (application_name ``headwater-<topic.prefix>``)."""
    with psycopg.connect(server.dsn(), autocommit=True) as db:
        rows = db.execute("SELECT pid FROM pg_stat_replication WHERE application_name = %s",
                          (f"headwater-{prefix}",)).fetchall()
    return {pid for (pid,) in rows}
