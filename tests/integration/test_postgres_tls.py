"""Postgres over TLS with Debezium's and JDBC's keys, against a private server with ssl=on and only hostssl
lines in pg_hba.conf (tests/support/pgtls.py): the CDC source (snapshot, then streaming on its replication
connection) and the sink with verify-full, both with a password and with a client certificate; a wrong
root certificate and a plaintext attempt fail the task at once, saying why; passwords stay out of the log
and the traces."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from support.connectproc import ConnectProcess, module_connect, unique, wait_for
from support.pgserver import PostgresServer
from support.pgtls import CERT_USER, PASSWORD_USER, TlsFiles, start_tls_postgres
from test_postgres_cdc import JSON_PLAIN

pytestmark = pytest.mark.timeout(180)

connect = module_connect("postgres-tls")
PASSWORD = "pw-" + uuid.uuid4().hex  # PASSWORD_USER's: must never show in the log or a trace
JSON = {**JSON_PLAIN, "key.converter.schemas.enable": "true", "value.converter.schemas.enable": "true"}


@pytest.fixture(scope="module")
def tls_postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PostgresServer, TlsFiles]]:
    server, files = start_tls_postgres(tmp_path_factory.mktemp("pg-tls"))
    try:
        with admin(server, files) as conn:
            conn.execute(f"CREATE ROLE {CERT_USER} LOGIN SUPERUSER")
            conn.execute(f"CREATE ROLE {PASSWORD_USER} LOGIN SUPERUSER PASSWORD '{PASSWORD}'")
        yield server, files
    finally:
        server.stop()


def admin(server: PostgresServer, files: TlsFiles, dbname: str | None = None) -> psycopg.Connection[Any]:
    """The tests' own connection, as the superuser (trusted over TLS)."""
    return psycopg.connect(server.dsn(dbname, sslmode="verify-full", sslrootcert=str(files.ca)), autocommit=True)


def new_database(server: PostgresServer, files: TlsFiles) -> str:
    name = "tls_" + uuid.uuid4().hex[:8]
    with admin(server, files) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return name


def source(server: PostgresServer, database: str, prefix: str, **tls: str) -> dict[str, str]:
    """A Debezium source config; ``tls``: the database.* user and TLS keys."""
    return {"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": "localhost", "database.port": str(server.port), "database.dbname": database,
            "topic.prefix": prefix, "slot.name": f"slot_{uuid.uuid4().hex[:8]}",
            "publication.name": f"pub_{uuid.uuid4().hex[:6]}", **JSON, **tls}


def sink(server: PostgresServer, database: str, topics: str, query: str, **keys: str) -> dict[str, str]:
    """A JDBC sink config whose connection.url ends in ``query``; ``keys``: connection.* keys."""
    return {"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
            "connection.url": f"jdbc:postgresql://127.0.0.1:{server.port}/{database}?{query}",
            "topics.regex": topics, "insert.mode": "upsert", "primary.key.mode": "record_key",
            "table.name.format": "${source.schema}.${source.table}",
            "consumer.override.metadata.max.age.ms": "1000", **JSON, **keys}


def failed_trace(connect: ConnectProcess, name: str) -> str:
    def check() -> str | None:
        tasks = connect.status(name)["tasks"]
        return tasks[0].get("trace") if tasks and tasks[0]["state"] == "FAILED" else None

    return wait_for(check, 30, 0.1, f"{name}'s task FAILED", connect.log_text)


def replicate(connect: ConnectProcess, server: PostgresServer, files: TlsFiles, source_tls: dict[str, str],
              sink_query: str, sink_keys: dict[str, str]) -> None:
    """Rows of A (snapshot, then streamed) reach B through the source and the sink, both over TLS; the
    source's replication connection is a TLS one."""
    a, b, prefix = new_database(server, files), new_database(server, files), unique("pgtls")
    with admin(server, files, a) as db_a, admin(server, files, b) as db_b:
        db_a.execute("CREATE TABLE items (id int PRIMARY KEY, name text)")
        db_a.execute("INSERT INTO items VALUES (1, 'snapshot one'), (2, 'snapshot two')")
        src, dst = unique("pgtls-src"), unique("pgtls-sink")
        connect.create(src, source(server, a, prefix, **source_tls))
        connect.create(dst, sink(server, b, rf"{prefix}\.public\..*", sink_query, **sink_keys))
        connect.wait_state(src, "RUNNING", tasks=1)

        def rows() -> list[tuple[Any, ...]]:
            try:
                return db_b.execute("SELECT id, name FROM items ORDER BY id").fetchall()
            except psycopg.errors.UndefinedTable:
                return []

        wait_for(lambda: len(rows()) == 2, 60, 0.2, "the snapshot's rows in B", connect.log_text)
        db_a.execute("INSERT INTO items VALUES (3, 'streamed')")
        db_a.execute("UPDATE items SET name = 'updated' WHERE id = 1")
        wait_for(lambda: rows() == [(1, "updated"), (2, "snapshot two"), (3, "streamed")], 60, 0.2,
                 "the streamed changes in B", connect.log_text)
        walsender = db_a.execute(
            "SELECT s.ssl, s.client_dn FROM pg_stat_replication r JOIN pg_stat_ssl s USING (pid) "
            "WHERE r.application_name = %s", (f"headwater-{prefix}",)).fetchall()
        states = [connect.status(n)["tasks"][0]["state"] for n in (src, dst)]
        for name in (src, dst):
            connect.ok("DELETE", f"/connectors/{name}", expect=204)
    assert states == ["RUNNING", "RUNNING"]
    client_dn = f"/CN={CERT_USER}" if "database.sslcert" in source_tls else None
    assert walsender == [(True, client_dn)], walsender
    assert PASSWORD not in connect.log_text()


def test_source_and_sink_with_verify_full_and_a_password(connect: ConnectProcess, tls_postgres) -> None:
    server, files = tls_postgres
    replicate(connect, server, files,
              {"database.user": PASSWORD_USER, "database.password": PASSWORD, "database.sslmode": "verify-full",
               "database.sslrootcert": str(files.ca)},
              f"sslmode=verify-full&sslrootcert={files.ca}",
              {"connection.user": PASSWORD_USER, "connection.password": PASSWORD})


def test_source_and_sink_authenticate_with_client_certificates(connect: ConnectProcess, tls_postgres) -> None:
    server, files = tls_postgres
    replicate(connect, server, files,
              {"database.user": CERT_USER, "database.sslmode": "verify-full", "database.sslrootcert": str(files.ca),
               "database.sslcert": str(files.encrypted_cert), "database.sslkey": str(files.encrypted_key),
               "database.sslpassword": files.key_password},
              f"sslmode=verify-full&sslrootcert={files.ca}&sslcert={files.cert}&sslkey={files.key}",
              {"connection.username": CERT_USER})
    assert files.key_password not in connect.log_text()


def test_a_wrong_root_certificate_fails_source_and_sink_in_seconds(connect: ConnectProcess, tls_postgres) -> None:
    server, files = tls_postgres
    database = new_database(server, files)
    src, dst, renewed = unique("pgtls-wrongca-src"), unique("pgtls-wrongca-sink"), unique("pgtls-samename-src")
    started = time.monotonic()
    for name, ca in ((src, files.wrong_ca), (renewed, files.same_name_ca)):
        connect.create(name, source(server, database, unique("pgw"), **{
            "database.user": PASSWORD_USER, "database.password": PASSWORD, "database.sslmode": "verify-full",
            "database.sslrootcert": str(ca)}))
    connect.create(dst, sink(server, database, "nothing", f"sslmode=verify-full&sslrootcert={files.wrong_ca}",
                             **{"connection.user": PASSWORD_USER, "connection.password": PASSWORD}))
    traces = [failed_trace(connect, name) for name in (src, dst, renewed)]
    took = time.monotonic() - started
    print(f"\nwrong root certificate: the three tasks FAILED {took:.1f}s after their creation")
    for trace in traces:
        assert "the server's certificate failed verification against" in trace, trace
        assert PASSWORD not in trace
    assert all("SSL error: certificate verify failed" in trace for trace in traces[:2]), traces
    assert "SSL error: provider signature failure" in traces[2], traces[2]  # OpenSSL's words for a CA made anew
    assert "database.sslrootcert" in traces[0] and "the sslrootcert parameter of connection.url" in traces[1]
    assert took < 20, took  # a refusal, not a hang or retries (20 s: a loaded machine)
    for name in (src, dst, renewed):
        connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_a_plaintext_connection_is_refused_with_a_clear_error(connect: ConnectProcess, tls_postgres) -> None:
    server, files = tls_postgres
    database = new_database(server, files)
    src, dst = unique("pgtls-plain-src"), unique("pgtls-plain-sink")
    connect.create(src, source(server, database, unique("pgp"), **{
        "database.user": PASSWORD_USER, "database.password": PASSWORD, "database.sslmode": "disable"}))
    connect.create(dst, sink(server, database, "nothing", "sslmode=disable",
                             **{"connection.user": PASSWORD_USER, "connection.password": PASSWORD}))
    traces = [failed_trace(connect, name) for name in (src, dst)]
    for trace in traces:
        assert "no pg_hba.conf entry" in trace and "no encryption" in trace, trace
        assert "the server takes only TLS connections from here" in trace, trace
        assert PASSWORD not in trace
    assert "set database.sslmode to verify-full" in traces[0]
    assert "set the sslmode parameter of connection.url to verify-full" in traces[1]
    for name in (src, dst):
        connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_validation_names_a_mistyped_key_and_a_missing_file_and_hides_passwords(connect: ConnectProcess,
                                                                               tls_postgres) -> None:
    server, files = tls_postgres
    config = {"name": unique("pgtls-typo"), **source(server, "postgres", unique("pgv"), **{
        "database.user": PASSWORD_USER, "database.password": PASSWORD, "database.sslmod": "verify-full",
        "database.sslrootcert": str(files.ca) + ".missing"})}
    validate = "/connector-plugins/PostgresConnector/config/validate"
    result = connect.ok("PUT", validate, config, expect=200)
    found = {c["value"]["name"]: c["value"] for c in result["configs"]}
    assert found["database.sslmod"]["errors"] == [
        "Invalid configuration database.sslmod: is not a setting of this connector nor a libpq connection "
        "parameter (did you mean database.sslmode?)"]
    assert found["database.password"]["value"] == "[hidden]" and PASSWORD not in str(result)
    fixed = {k.replace("database.sslmod", "database.sslmode"): v for k, v in config.items()}
    found = {c["value"]["name"]: c["value"] for c in connect.ok("PUT", validate, fixed, expect=200)["configs"]}
    assert found["database.sslrootcert"]["errors"] == [
        f"Invalid configuration database.sslrootcert: file {files.ca}.missing does not exist (or is not a file)"]
    refused = connect.call("POST", "/connectors", {"name": config["name"], "config": config})
    answer = refused.body.decode()
    assert refused.status == 400 and "database.sslmod" in answer and PASSWORD not in answer, answer
    url = f"jdbc:postgresql://127.0.0.1:{server.port}/postgres?sslmode=verify-full&sslrootcert={files.ca}&sslmdoe=x"
    sink_result = connect.ok("PUT", "/connector-plugins/JdbcSinkConnector/config/validate",
                             {"name": "s", **sink(server, "postgres", "t", "", **{"connection.url": url,
                                                                                  "connection.password": PASSWORD})})
    sink_found = {c["value"]["name"]: c["value"] for c in sink_result["configs"]}
    assert sink_found["connection.url"]["errors"] == [
        "Invalid configuration connection.url: parameter sslmdoe is not a setting of this connector nor a libpq "
        "connection parameter (did you mean sslmode?)"]
    assert PASSWORD not in str(sink_result)
