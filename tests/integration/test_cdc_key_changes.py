"""Primary-key changes and deletes from Postgres CDC through both sinks: Postgres A -> CDC source -> topics
-> the Postgres sink (database B) and the Spark lake in upsert mode, as configs/postgres/*.json and
configs/spark/lake-upsert.json ship them. Tables with numeric NOT NULL columns and composite keys, under
REPLICA IDENTITY DEFAULT and FULL; keys changed once, twice in one transaction, deleted and inserted again in
one transaction. Both sinks must end with exactly A's rows (a key change under FULL used to be one ``u``
event under the new key, and every sink by key kept the old row)."""

from __future__ import annotations

import random
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from support.connectproc import ConnectProcess, unique, wait_for
from support.lake import mid_swap

pytestmark = pytest.mark.timeout(300)

JSON = {"key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter"}  # with schemas, as the configs ship
TABLES = {  # name: (DDL body, key columns, the columns compared)
    "customers": ("id int PRIMARY KEY, name text NOT NULL, balance numeric(12,2) NOT NULL, email text, "
                  "seen timestamptz NOT NULL, doc jsonb, active boolean NOT NULL", ("id",), ("name", "balance")),
    "orders": ("customer_id int, order_no int, amount numeric(10,2) NOT NULL, note text, "
               "PRIMARY KEY (customer_id, order_no)", ("customer_id", "order_no"), ("amount", "note")),
    "events": ("id bigint PRIMARY KEY, kind text NOT NULL, at timestamptz", ("id",), ("kind",)),
}


def create(db: psycopg.Connection, identity: str) -> list[str]:
    names = []
    for table, (body, _, _) in TABLES.items():
        name = f"{table}_{identity}"
        db.execute(f"CREATE TABLE {name} ({body})")
        db.execute(f"ALTER TABLE {name} REPLICA IDENTITY {identity.upper()}")
        names.append(name)
    db.execute(f"INSERT INTO customers_{identity} SELECT g, 'c' || g, g * 1.25, NULL, now(), '{{\"g\": 1}}', true "
               "FROM generate_series(1, 200) g")
    db.execute(f"INSERT INTO orders_{identity} SELECT g % 50, g, g * 2.5, 'n' || g FROM generate_series(1, 300) g")
    db.execute(f"INSERT INTO events_{identity} SELECT g, 'k' || (g % 7), now() FROM generate_series(1, 200) g")
    return names


def workload(db: psycopg.Connection, identity: str, rng: random.Random) -> None:
    c, o, e = f"customers_{identity}", f"orders_{identity}", f"events_{identity}"
    for n in range(60):
        with db.transaction():
            db.execute(f"UPDATE {c} SET balance = balance + 1, name = name || '!' WHERE id = %s",
                       (rng.randint(1, 200),))
            ids = [r[0] for r in db.execute(f"SELECT id FROM {c} ORDER BY random() LIMIT 3").fetchall()]
            fresh = 1000 + n * 10
            db.execute(f"UPDATE {c} SET id = %s WHERE id = %s", (fresh, ids[0]))  # a key change
            db.execute(f"UPDATE {c} SET id = %s WHERE id = %s", (fresh + 1, ids[1]))  # a key changed twice
            db.execute(f"UPDATE {c} SET id = %s WHERE id = %s", (fresh + 2, fresh + 1))
            db.execute(f"DELETE FROM {c} WHERE id = %s", (ids[2],))  # deleted and inserted again
            db.execute(f"INSERT INTO {c} VALUES (%s, 'again', 7.50, 'x@y', now(), NULL, false)", (ids[2],))
            row = db.execute(f"SELECT customer_id, order_no FROM {o} ORDER BY random() LIMIT 1").fetchone()
            if row is not None:  # a composite key: one of its two columns changes
                db.execute(f"UPDATE {o} SET order_no = %s, amount = amount + 1 WHERE customer_id = %s AND "
                           "order_no = %s", (5000 + n, row[0], row[1]))
            db.execute(f"DELETE FROM {o} WHERE customer_id = %s", (rng.randint(0, 49),))
            db.execute(f"UPDATE {e} SET id = id + 100000 WHERE id = (SELECT min(id) FROM {e})")
            db.execute(f"DELETE FROM {e} WHERE id = (SELECT max(id) FROM {e} WHERE id < 100000)")
            db.execute(f"INSERT INTO {e} VALUES (%s, 'new', NULL)", (200000 + n,))


def rows(db: psycopg.Connection, name: str) -> dict[tuple, tuple]:
    _, key, compared = TABLES[name.rsplit("_", 1)[0]]
    got = db.execute(f"SELECT {', '.join(key + compared)} FROM {name}").fetchall()
    return {r[:len(key)]: tuple(r[len(key):]) for r in got}


def lake_rows(spark: Any, path: Path, name: str) -> dict[tuple, tuple]:
    _, key, compared = TABLES[name.rsplit("_", 1)[0]]
    if not path.exists():
        return {}
    got = spark.read.option("mergeSchema", "true").parquet(str(path)).collect()
    return {tuple(r[k] for k in key): tuple(r[c] for c in compared) for r in got}


def test_key_changes_and_deletes_reach_both_sinks_exactly(postgres, spark, tmp_path: Path) -> None:
    a, b = "ka_" + uuid.uuid4().hex[:8], "kb_" + uuid.uuid4().hex[:8]
    with psycopg.connect(postgres.dsn(), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {a}")
        admin.execute(f"CREATE DATABASE {b}")
    prefix, lake = unique("keys").replace("-", "_"), tmp_path / "lake"
    rng = random.Random(5)
    with psycopg.connect(postgres.dsn(a), autocommit=True) as db_a, \
            psycopg.connect(postgres.dsn(b), autocommit=True) as db_b, ConnectProcess(tmp_path / "up") as up:
        tables = create(db_a, "default") + create(db_a, "full")
        src = unique("keys-src")
        up.create(src, {"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                        "database.hostname": postgres.host, "database.port": str(postgres.port),
                        "database.user": postgres.user, "database.password": postgres.password or "",
                        "database.dbname": a, "topic.prefix": prefix, "plugin.name": "pgoutput",
                        "slot.name": f"slot_{uuid.uuid4().hex[:8]}", "publication.name": f"pub_{uuid.uuid4().hex[:6]}",
                        "publication.autocreate.mode": "filtered", "table.include.list": "public\\..*", **JSON})
        up.create(unique("keys-pg"), {
            "connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector",
            "connection.url": f"jdbc:postgresql://{postgres.host}:{postgres.port}/{b}",
            "connection.username": postgres.user, "connection.password": postgres.password or "",
            "topics.regex": rf"{prefix}\.public\..*", "table.name.format": "${source.schema}.${source.table}",
            "insert.mode": "upsert", "primary.key.mode": "record_key", "delete.enabled": "true",
            "schema.evolution": "basic", "consumer.override.metadata.max.age.ms": "1000", **JSON})
        up.create(unique("keys-lake"), {
            "connector.class": "SparkParquetSink", "topics.regex": rf"{prefix}\.public\..*", "lake.path": str(lake),
            "topics.dir": "tables", "table.name.format": "${topic}", "cdc.mode": "upsert", "cdc.buckets": "4",
            "flush.size": "20000", "rotate.schedule.interval.ms": "1000",
            "consumer.override.metadata.max.age.ms": "1000", **JSON})
        up.wait_state(src, "RUNNING", tasks=1)
        for identity in ("default", "full"):
            workload(db_a, identity, rng)
        want = {name: rows(db_a, name) for name in tables}

        def postgres_sink_equal() -> bool:
            try:
                return all(rows(db_b, name) == want[name] for name in tables)
            except (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedColumn):
                return False

        def lake_equal() -> bool:
            try:
                return all(lake_rows(spark, lake / "tables" / f"{prefix}.public.{name}", name) == want[name]
                           for name in tables)
            except Exception as exc:
                if mid_swap(exc):
                    return False
                raise

        def diff(read: Any) -> str:
            out = []
            for name in tables:
                got = read(name)
                extra, missing = set(got) - set(want[name]), set(want[name]) - set(got)
                wrong = [k for k in set(got) & set(want[name]) if got[k] != want[name][k]]
                out.append(f"{name}: {len(extra)} extra {sorted(extra)[:5]}, {len(missing)} missing "
                           f"{sorted(missing)[:5]}, {len(wrong)} differ")
            return "; ".join(out)

        try:
            wait_for(postgres_sink_equal, 120, 0.5, "the Postgres sink's tables to equal A's")
        except AssertionError:
            raise AssertionError(diff(lambda name: rows(db_b, name))) from None
        try:
            wait_for(lake_equal, 120, 1.0, "the upsert lake's tables to equal A's")
        except AssertionError:
            raise AssertionError(diff(lambda name: lake_rows(spark, lake / "tables" / f"{prefix}.public.{name}",
                                                             name))) from None
        states = [up.status(n)["tasks"][0]["state"] for n in up.ok("GET", "/connectors")]
    assert states == ["RUNNING"] * 3, states
    for identity in ("default", "full"):  # the workload's marks are there: keys changed, twice, and re-inserted
        customers = want[f"customers_{identity}"]
        assert len([k for k in customers if k[0] >= 1000]) > 50 and list(customers.values()).count(
            ("again", Decimal("7.50"))) > 20, customers
        assert len([k for k in want[f"orders_{identity}"] if k[1] >= 5000]) > 0
