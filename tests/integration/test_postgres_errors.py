"""Postgres CDC under bad input: each fault gives the task FAILED with a trace that says what to fix (or
keeps it going, where Debezium keeps going), and a connector that fails leaves no slot or publication
behind."""

from __future__ import annotations

import time
import uuid

import psycopg
import pytest
from support.connectproc import ConnectProcess, TopicReader, module_connect, unique, wait_for
from support.pgserver import fetch_one
from test_postgres_cdc import events, source

pytestmark = pytest.mark.timeout(120)

connect = module_connect("postgres-errors")


@pytest.fixture
def database(postgres) -> str:
    name = "err_" + uuid.uuid4().hex[:8]
    with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    with psycopg.connect(postgres.dsn(name), autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    return name


def failed_trace(connect: ConnectProcess, name: str) -> str:
    def check() -> str | None:
        tasks = connect.status(name)["tasks"]
        return tasks[0].get("trace") if tasks and tasks[0]["state"] == "FAILED" else None

    return wait_for(check, 30, 0.1, f"{name}'s task FAILED", connect.log_text)


def leftovers(postgres, database: str) -> tuple[list, list]:
    with psycopg.connect(postgres.dsn(database), autocommit=True) as db:
        slots = db.execute("SELECT slot_name FROM pg_replication_slots WHERE database = %s", (database,)).fetchall()
        pubs = db.execute("SELECT pubname FROM pg_publication").fetchall()
    return slots, pubs


def test_an_unreachable_server_or_unknown_user_fails_the_task_naming_it(connect: ConnectProcess, postgres,
                                                                       database: str) -> None:
    for extra, words in (({"database.port": "1"}, ("127.0.0.1:1", "Connection refused")),
                         ({"database.user": "nobody_here"}, ("nobody_here", "does not exist"))):
        name = unique("pg-unreachable")
        connect.create(name, source(postgres, database, unique("pgu"), **extra))
        trace = failed_trace(connect, name)
        assert "Cannot connect to PostgreSQL" in trace and all(w in trace for w in words), trace
        connect.ok("DELETE", f"/connectors/{name}", expect=204)
    assert leftovers(postgres, database) == ([], [])


def test_a_user_without_replication_fails_and_leaves_nothing_behind(connect: ConnectProcess, postgres,
                                                                     database: str) -> None:
    user = "plain_" + uuid.uuid4().hex[:6]
    with psycopg.connect(postgres.dsn(database), autocommit=True) as db:
        db.execute(f"CREATE ROLE {user} LOGIN")
        db.execute(f"GRANT SELECT ON t TO {user}")
    name = unique("pg-norepl")
    connect.create(name, source(postgres, database, unique("pgr"), **{"database.user": user}))
    trace = failed_trace(connect, name)
    assert f"User {user} lacks the REPLICATION attribute: ALTER ROLE {user} REPLICATION" in trace, trace
    assert leftovers(postgres, database) == ([], [])
    connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_wal_level_replica_fails_the_task_saying_to_set_logical(connect: ConnectProcess) -> None:
    from support.pgserver import start_postgres

    server = start_postgres(wal_level="replica")
    try:
        name = unique("pg-wal")
        connect.create(name, source(server, "postgres", unique("pgl")))
        trace = failed_trace(connect, name)
        assert "wal_level is replica, not logical: set wal_level = logical" in trace, trace
        connect.ok("DELETE", f"/connectors/{name}", expect=204)
    finally:
        server.stop()


def test_a_slot_held_by_another_connector_fails_the_second(connect: ConnectProcess, postgres, database: str) -> None:
    slot = f"slot_{uuid.uuid4().hex[:8]}"
    first, second = unique("pg-first"), unique("pg-second")
    connect.create(first, source(postgres, database, unique("pg1"), **{"slot.name": slot}))
    connect.wait_state(first, "RUNNING", tasks=1)
    time.sleep(1)  # streaming
    connect.create(second, source(postgres, database, unique("pg2"), **{"slot.name": slot}))
    trace = failed_trace(connect, second)
    assert f"Replication slot {slot} is in use by another connection" in trace and "own slot.name" in trace
    assert connect.status(first)["tasks"][0]["state"] == "RUNNING"
    for name in (first, second):
        connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_a_table_without_primary_key_has_null_keys_and_a_dropped_table_stops_nothing(
        connect: ConnectProcess, postgres, database: str) -> None:
    prefix = unique("pgn")
    with psycopg.connect(postgres.dsn(database), autocommit=True) as db:
        db.execute("CREATE TABLE nokey (a int, b text)")
        name = unique("pg-nokey")
        connect.create(name, source(postgres, database, prefix, **{"snapshot.mode": "no_data"}))
        connect.wait_state(name, "RUNNING", tasks=1)
        time.sleep(1)
        db.execute("INSERT INTO nokey VALUES (1, 'x'), (2, 'y')")
        db.execute("DROP TABLE nokey")
        db.execute("INSERT INTO t VALUES (1, 'after the drop')")
        with TopicReader(connect.bootstrap, f"{prefix}.public.nokey") as reader:
            got = events(reader, 2)
        with TopicReader(connect.bootstrap, f"{prefix}.public.t") as reader:
            after = events(reader, 1)
    assert [k for k, _ in got] == [None, None] and [v["after"]["a"] for _, v in got] == [1, 2]
    assert after[0][1]["after"] == {"id": 1, "v": "after the drop"}
    assert connect.status(name)["tasks"][0]["state"] == "RUNNING"
    assert connect.log_text().count("table public.nokey has no primary key") == 1
    connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_the_shipped_configs_validate(connect: ConnectProcess) -> None:
    """configs/postgres/*.json pass PUT /connector-plugins/{plugin}/config/validate with no error."""
    import json

    from support.workerproc import REPO

    for path in sorted((REPO / "configs" / "postgres").glob("*.json")):
        body = json.loads(path.read_text())
        config = {**body["config"], "name": body["name"]}
        plugin = config["connector.class"].rsplit(".", 1)[-1]
        result = connect.ok("PUT", f"/connector-plugins/{plugin}/config/validate", config, expect=200)
        assert result["error_count"] == 0, (path.name, [c["value"] for c in result["configs"] if c["value"]["errors"]])


def test_a_change_that_cannot_be_converted_goes_through_errors_tolerance(connect: ConnectProcess, postgres,
                                                                         database: str) -> None:
    """A NaN in a numeric(10,2) NOT NULL column has no Decimal form. errors.tolerance=none: the task fails
    naming the table, the column and the problem. errors.tolerance=all: the change is logged and left out,
    the ones after it arrive, and the slot moves past it (it does not hold WAL for ever)."""
    with psycopg.connect(postgres.dsn(database), autocommit=True) as db:
        db.execute("CREATE TABLE orders (id int PRIMARY KEY, amount numeric(10,2) NOT NULL)")
        slots = {}
        for tolerance in ("none", "all"):
            name, prefix, slot = unique(f"pg-tol-{tolerance}"), unique("pgtol"), f"slot_{uuid.uuid4().hex[:8]}"
            slots[tolerance] = (name, prefix, slot)
            connect.create(name, source(postgres, database, prefix, **{
                "slot.name": slot, "snapshot.mode": "no_data", "errors.tolerance": tolerance,
                "errors.log.enable": "true"}))
            connect.wait_state(name, "RUNNING", tasks=1)
        wait_for(lambda: len(db.execute("SELECT 1 FROM pg_replication_slots WHERE active AND slot_name = ANY(%s)",
                                        ([s for _, _, s in slots.values()],)).fetchall()) == 2 or None,
                 30, 0.1, "both slots streaming")
        time.sleep(1)
        db.execute("INSERT INTO orders VALUES (1, 'NaN')")
        bad_end = fetch_one(db, "SELECT pg_current_wal_lsn()")[0]
        db.execute("INSERT INTO orders VALUES (2, 2.50)")

        trace = failed_trace(connect, slots["none"][0])
        assert "Cannot convert column amount (org.apache.kafka.connect.data.Decimal, NOT NULL) of table " \
               "public.orders: 'NaN' converts to null" in trace, trace
        assert "Tolerance exceeded in error handler (stage TASK_POLL" in trace, trace

        name, prefix, slot = slots["all"]
        with TopicReader(connect.bootstrap, f"{prefix}.public.orders") as reader:
            got = events(reader, 1)
        assert [v["after"]["id"] for _, v in got] == [2]

        def moved_past() -> bool:
            row = db.execute("SELECT confirmed_flush_lsn >= %s::pg_lsn FROM pg_replication_slots "
                             "WHERE slot_name = %s", (str(bad_end), slot)).fetchone()
            return bool(row and row[0])

        wait_for(moved_past, 30, 0.2, "the slot to move past the change left out", connect.log_text)
        assert connect.status(name)["tasks"][0]["state"] == "RUNNING"
        assert "left out a change that cannot be converted (errors.tolerance=all)" in connect.log_text()
        for name, _, _ in slots.values():
            connect.ok("DELETE", f"/connectors/{name}", expect=204)
