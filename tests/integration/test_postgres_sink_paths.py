"""The Postgres sink's paths through real workers: records read in wire form (``put_encoded``) write what the
record path writes, and a put's commit, sent without waiting, fails the task when it fails and loses or
repeats nothing after a restart."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from support.connectproc import ConnectProcess, module_connect, unique, wait_for
from support.pgserver import fetch_one
from test_postgres_cdc import source
from test_postgres_streamed import KEEP_ALL

pytestmark = pytest.mark.timeout(240)

connect = module_connect("postgres-sink-paths")
JSON = {"key.converter": "org.apache.kafka.connect.json.JsonConverter", "key.converter.schemas.enable": "false",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": "false"}
BIG = "y" * 5000  # stored out of line (STORAGE EXTERNAL): an update that leaves it alone does not send it


def _databases(postgres, *names: str) -> list[str]:
    return [postgres.new_database(n) for n in names]


def _sink(postgres, database: str, prefix: str, **extra: str) -> dict[str, str]:
    return {"connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector",
            "connection.url": f"jdbc:postgresql://{postgres.host}:{postgres.port}/{database}",
            "connection.username": postgres.user, "connection.password": postgres.password or "",
            "topics.regex": rf"{prefix}\.public\..*", "primary.key.mode": "record_key",
            "table.name.format": "${source.schema}.${source.table}", "consumer.override.max.poll.records": "50",
            "consumer.override.metadata.max.age.ms": "1000", **JSON, **extra}


def _rows(db: psycopg.Connection, table: str = "items") -> list[tuple[Any, ...]]:
    try:
        return db.execute(f"SELECT id, n, body, note FROM {table} ORDER BY id").fetchall()
    except (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedColumn):
        return []


def test_records_in_wire_form_write_what_the_record_path_writes(connect: ConnectProcess, postgres) -> None:
    """Inserts with NULLs, updates leaving a TOASTed value out, key changes, deletes and a truncate, in batches
    of up to 50 records: the table the wire-form path writes equals the record path's, and the source's."""
    a, fast, slow = _databases(postgres, "a", "fast", "slow")
    prefix = unique("paths")
    with psycopg.connect(postgres.dsn(a), autocommit=True) as db:
        db.execute("CREATE TABLE items (id int PRIMARY KEY, n int, body text, note text)")
        db.execute("ALTER TABLE items ALTER COLUMN body SET STORAGE EXTERNAL")
        src = unique("paths-src")
        connect.create(src, source(postgres, a, prefix, **JSON, **{"skipped.operations": "none",
                                                                   "snapshot.mode": "no_data"}))
        connect.wait_state(src, "RUNNING", tasks=1)
        for target in (fast, slow):  # (schemaless JSON: the sink would make every column text)
            with psycopg.connect(postgres.dsn(target), autocommit=True) as t:
                t.execute("CREATE TABLE items (id int PRIMARY KEY, n int, body text, note text)")
        sinks = {fast: unique("paths-fast"), slow: unique("paths-slow")}
        connect.create(sinks[fast], _sink(postgres, fast, prefix))
        connect.create(sinks[slow], _sink(postgres, slow, prefix, **KEEP_ALL))
        for i in range(300):
            with db.transaction():
                db.execute("INSERT INTO items VALUES (%s, %s, %s, %s)", (i, i if i % 7 else None,
                                                                         "short" if i % 2 else BIG,
                                                                         None if i % 3 else f"note {i}"))
                if i % 10 == 9:
                    db.execute("UPDATE items SET n = -n WHERE id = %s", (i - 5,))  # body left out: TOASTed
                if i % 25 == 24:
                    # a key change of a row whose body is inline (a TOASTed one would reach the new key as the
                    # placeholder, with no row to keep it from: NULL in both paths, as in Debezium's sink)
                    moved = i - 21 if (i - 21) % 2 else i - 22
                    db.execute("UPDATE items SET id = id + 1000 WHERE id = %s", (moved,))
                    db.execute("DELETE FROM items WHERE id = %s", (i - 1,))
                if i == 200:
                    db.execute("TRUNCATE items")
        want = _rows(db)
        with psycopg.connect(postgres.dsn(fast)) as b, psycopg.connect(postgres.dsn(slow)) as c:
            def equal() -> bool:
                got = (_rows(b), _rows(c))
                b.rollback()
                c.rollback()
                return got == (want, want)

            wait_for(equal, 120, 0.5, "both sinks' tables to equal the source's", connect.log_text)
        states = [connect.status(name)["tasks"][0]["state"] for name in (src, *sinks.values())]
        for name in (src, *sinks.values()):
            connect.ok("DELETE", f"/connectors/{name}", expect=204)
    assert states == ["RUNNING"] * 3
    assert len(want) == 99 - 4 and any(r[2] == BIG and r[1] is not None and r[1] < 0 for r in want)


def test_a_commit_that_fails_fails_the_task_and_a_restart_writes_each_row_once(connect: ConnectProcess,
                                                                                postgres) -> None:
    """A constraint checked at COMMIT (deferred) refuses a batch: the task fails, the rows and offsets of that
    put are not in the table; once the constraint is gone, a restart resumes from the table's offsets and
    writes every row once (insert.mode=insert: a row written twice would fail the task again)."""
    a, b = _databases(postgres, "a", "b")
    prefix = unique("commit")
    with psycopg.connect(postgres.dsn(a), autocommit=True) as db, \
            psycopg.connect(postgres.dsn(b), autocommit=True) as target:
        db.execute("CREATE TABLE items (id int PRIMARY KEY, n int, body text, note text)")
        target.execute("CREATE TABLE items (id int PRIMARY KEY, n int, body text, note text, "
                       "CONSTRAINT unique_n UNIQUE (n) DEFERRABLE INITIALLY DEFERRED)")
        src, sink = unique("commit-src"), unique("commit-sink")
        connect.create(src, source(postgres, a, prefix, **JSON, **{"snapshot.mode": "no_data"}))
        connect.wait_state(src, "RUNNING", tasks=1)
        connect.create(sink, _sink(postgres, b, prefix, **{"insert.mode": "insert"}))
        for i in range(100):
            db.execute("INSERT INTO items VALUES (%s, %s, 'b', NULL)", (i, i))
        wait_for(lambda: len(_rows(target)) == 100, 60, 0.5, "the first 100 rows in B", connect.log_text)
        db.execute("INSERT INTO items VALUES (100, 7, 'b', 'n of row 7 again: refused at COMMIT')")
        for i in range(101, 150):
            db.execute("INSERT INTO items VALUES (%s, %s, 'b', NULL)", (i, i))

        def failed() -> bool:
            return connect.status(sink)["tasks"][0]["state"] == "FAILED"

        wait_for(failed, 60, 0.5, "the sink task to fail at its commit", connect.log_text)
        trace = connect.status(sink)["tasks"][0].get("trace") or ""
        kept = _rows(target)
        stored = fetch_one(target, "SELECT coalesce(sum(next_offset), 0) FROM __headwater_sink_offsets")[0]
        assert 100 <= len(kept) < 150 and stored == len(kept), (len(kept), stored)  # rows and offsets together
        assert all(r[0] != 100 for r in kept)
        target.execute("ALTER TABLE items DROP CONSTRAINT unique_n")
        connect.ok("POST", f"/connectors/{sink}/tasks/0/restart", expect=204)
        want = _rows(db)
        wait_for(lambda: _rows(target) == want, 60, 0.5, "B equal to A after the restart", connect.log_text)
        state = connect.status(sink)["tasks"][0]["state"]
        for name in (src, sink):
            connect.ok("DELETE", f"/connectors/{name}", expect=204)
    assert "unique_n" in trace and "at its commit" in trace, trace
    assert state == "RUNNING" and len(want) == 150
