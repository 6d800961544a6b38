"""Postgres table -> CDC (PostgresConnector) -> topic -> SparkParquetSink upsert: the lake table equals the
Postgres table, after a snapshot and after streamed inserts, updates, deletes and a primary-key change."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest
from connectproc import ConnectProcess, unique, wait_for

pytestmark = pytest.mark.timeout(300)

JSON = {"key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter"}  # with schemas: Debezium's types


def lake_table(spark, path: Path) -> dict[int, tuple]:
    df = spark.read.option("mergeSchema", "true").parquet(str(path))
    return {r["id"]: (r["name"], r["price"], r["active"], r["updated"]) for r in df.collect()}


def pg_table(db: psycopg.Connection) -> dict[int, tuple]:
    return {r[0]: r[1:] for r in db.execute("SELECT id, name, price, active, updated FROM items").fetchall()}


def test_postgres_table_to_cdc_to_upsert_lake_table_equals_the_source(postgres, spark, tmp_path: Path) -> None:
    dbname = "lake_" + uuid.uuid4().hex[:8]
    with psycopg.connect(postgres.dsn(), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {dbname}")
    lake, prefix = tmp_path / "lake", unique("shop").replace("-", "_")
    with psycopg.connect(postgres.dsn(dbname), autocommit=True) as db, ConnectProcess(tmp_path / "up") as up:
        db.execute("CREATE TABLE items (id int PRIMARY KEY, name text, price numeric(10,2), active boolean, "
                   "updated timestamp)")
        db.execute("INSERT INTO items SELECT g, 'item ' || g, g * 1.5, g % 2 = 0, "
                   "'2026-01-01'::timestamp + g * interval '1 minute' FROM generate_series(1, 2000) g")
        up.create(unique("cdc"), {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": postgres.host, "database.port": str(postgres.port),
            "database.user": postgres.user, "database.password": postgres.password or "", "database.dbname": dbname,
            "topic.prefix": prefix, "plugin.name": "pgoutput", "slot.name": f"slot_{uuid.uuid4().hex[:8]}",
            "publication.name": f"pub_{uuid.uuid4().hex[:6]}", **JSON})
        name = unique("lake")
        up.create(name, {"connector.class": "SparkParquetSink", "topics": f"{prefix}.public.items",
                         "lake.path": str(lake), "cdc.mode": "upsert", "cdc.buckets": "4", "flush.size": "5000",
                         "rotate.schedule.interval.ms": "1000", "table.name.format": "items", **JSON})
        table = lake / "topics" / "items"

        def equal() -> bool:
            try:
                return table.exists() and lake_table(spark, table) == pg_table(db)
            except Exception as exc:  # listed a bucket just before the sink swapped it: read again
                if "FILE_NOT_EXIST" in str(exc) or "FileNotFoundException" in str(exc):
                    return False
                raise

        wait_for(equal, 120, 1.0, "the snapshot in the lake", lambda: up.log_text(True)[-4000:])
        db.execute("INSERT INTO items SELECT g, 'new ' || g, g, true, now()::timestamp(6) "
                   "FROM generate_series(2001, 2100) g")
        db.execute("UPDATE items SET price = price + 1, name = name || '!' WHERE id % 7 = 0")
        db.execute("DELETE FROM items WHERE id % 11 = 0")
        db.execute("UPDATE items SET id = 5000 WHERE id = 1")  # the primary key changes
        wait_for(equal, 120, 1.0, "the streamed changes in the lake", lambda: up.log_text(True)[-4000:])
        got = lake_table(spark, table)
    assert 5000 in got and 1 not in got and 11 not in got and got[14][0] == "item 14!"
    assert got[2] == ("item 2", Decimal("3.00"), True, dt.datetime(2026, 1, 1, 0, 2))
    schema = {f.name: f.dataType.simpleString() for f in spark.read.parquet(str(table)).schema.fields}
    assert schema["price"] == "decimal(10,2)" and schema["id"] == "int" and schema["active"] == "boolean"
