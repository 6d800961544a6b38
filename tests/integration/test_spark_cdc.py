"""Postgres table -> CDC (PostgresConnector) -> topic -> SparkParquetSink upsert: the lake table equals the
Postgres table, after a snapshot and after streamed inserts, updates, deletes and a primary-key change."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest
from support.connectproc import ConnectProcess, TopicReader, module_connect, unique, wait_for
from support.lake import mid_swap
from support.pgserver import fetch_one

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
            except Exception as exc:
                if mid_swap(exc):
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


# -- every captured type in a reader outside UTC; unchanged TOAST values in both sinks -------------------------

SCHEMAS = {**JSON, "key.converter.schemas.enable": "true", "value.converter.schemas.enable": "true"}
# The lake's Spark type of each column of test_postgres_cdc's TYPES_DDL, with the source's default settings
SPARK_TYPES = {
    "id": "int", "i2": "smallint", "i8": "bigint", "f4": "float", "f8": "double", "num": "decimal(10,3)",
    "numu": "struct<scale:int,value:binary>", "b": "boolean", "t": "string", "vc": "string", "ch": "string",
    "bin": "binary", "d": "date", "tm": "bigint", "tm3": "int", "ts": "timestamp_ntz", "ts3": "timestamp_ntz",
    "tz": "string", "tmz": "string", "iv": "bigint", "u": "string", "j": "string", "jb": "string", "e": "string",
    "ai": "array<int>", "at": "array<string>", "pt": "string", "ip": "string",
}
SPARK_VALUES = {
    "i2": 7, "i8": 9000000000, "f4": 1.5, "f8": 2.25, "num": Decimal("12.345"), "b": True, "t": "héllo",
    "vc": "abc", "ch": "ab ", "bin": bytearray(b"\x01\x02\xff"), "d": dt.date(2024, 1, 2), "tm": 45296789000,
    "tm3": 45296789, "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 123456), "ts3": dt.datetime(2024, 1, 2, 3, 4, 5, 123000),
    "tz": "2024-01-02T01:04:05Z", "tmz": "01:04:05Z", "iv": 93600000000, "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
    "j": '{"a":1}', "jb": '{"a": 1}', "e": "happy", "ai": [1, 2, None], "at": ["a b", "c"], "pt": "(1,2)",
    "ip": "10.0.0.1",
}

connect = module_connect("spark-cdc-types")


def new_database(postgres) -> str:
    name = "lake_" + uuid.uuid4().hex[:8]
    with psycopg.connect(postgres.dsn(), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    return name


def cdc_source(postgres, dbname: str, prefix: str) -> dict[str, str]:
    return {"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": postgres.host, "database.port": str(postgres.port),
            "database.user": postgres.user, "database.password": postgres.password or "", "database.dbname": dbname,
            "topic.prefix": prefix, "plugin.name": "pgoutput", "slot.name": f"slot_{uuid.uuid4().hex[:8]}",
            "publication.name": f"pub_{uuid.uuid4().hex[:6]}", **SCHEMAS}


def read_lake(spark, path: Path):
    """The table (without ``_bucket``), or None while it is absent or a bucket was swapped under the reader."""
    try:
        if not path.exists():
            return None
        return spark.read.option("mergeSchema", "true").parquet(str(path)).drop("_bucket")
    except Exception as exc:
        if mid_swap(exc):
            return None
        raise


def collected(spark, path: Path) -> list | None:
    try:
        df = read_lake(spark, path)
        return None if df is None else df.collect()
    except Exception as exc:
        if mid_swap(exc):
            return None
        raise


def test_every_captured_type_in_the_lake_read_in_a_new_york_session(connect: ConnectProcess, postgres, spark,
                                                                   tmp_path: Path) -> None:
    from test_postgres_cdc import TYPES_DDL, TYPES_ROW

    dbname, prefix, lake = new_database(postgres), unique("typ").replace("-", "_"), tmp_path / "lake"
    with psycopg.connect(postgres.dsn(dbname), autocommit=True) as db:
        db.execute(TYPES_DDL)
        db.execute(f"INSERT INTO typed VALUES ({TYPES_ROW})", (1,))  # snapshotted
        names = [unique("cdc"), unique("lake")]
        connect.create(names[0], cdc_source(postgres, dbname, prefix))
        connect.create(names[1], {"connector.class": "SparkParquetSink", "topics": f"{prefix}.public.typed",
                                        "lake.path": str(lake), "cdc.mode": "upsert", "cdc.buckets": "1",
                                        "rotate.schedule.interval.ms": "1000", "table.name.format": "typed",
                                        **SCHEMAS})
        table = lake / "topics" / "typed"
        wait_for(lambda: (rows := collected(spark, table)) is not None and len(rows) == 1, 120, 1.0,
                 "the snapshotted row in the lake", lambda: connect.log_text(True)[-4000:])
        db.execute(f"INSERT INTO typed VALUES ({TYPES_ROW})", (2,))  # streamed
        wait_for(lambda: (rows := collected(spark, table)) is not None and len(rows) == 2, 120, 1.0,
                 "the streamed row in the lake", lambda: connect.log_text(True)[-4000:])
        for name in names:
            connect.ok("DELETE", f"/connectors/{name}", expect=204)
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        df = read_lake(spark, table)
        assert df is not None
        types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
        rows = {r["id"]: r.asDict() for r in df.collect()}
        # what a reader's SQL sees: the wall clock Postgres stored, not shifted to New York
        shown = {r["id"]: r for r in df.selectExpr("id", "cast(ts as string) AS ts", "cast(ts3 as string) AS ts3",
                                                   "hour(ts) AS h").collect()}
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    assert types == SPARK_TYPES
    for i in (1, 2):
        got = rows[i]
        for column, value in SPARK_VALUES.items():
            assert got[column] == value, (i, column, got[column])
        assert got["numu"]["scale"] == 2 and bytes(got["numu"]["value"]) == (314).to_bytes(2, "big")
        assert (shown[i]["ts"], shown[i]["ts3"], shown[i]["h"]) == (
            "2024-01-02 03:04:05.123456", "2024-01-02 03:04:05.123", 3)


TOAST_DDL = "CREATE TABLE {t} (id int PRIMARY KEY, n int, body text, meta jsonb)"
# random hex: incompressible enough that Postgres stores it out of line (TOAST), well over 2 kB
BIG = "(SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 150))"


def test_unchanged_toast_values_are_kept_by_the_upsert_lake_and_the_postgres_sink(
        connect: ConnectProcess, postgres, spark, tmp_path: Path) -> None:
    dbname, replica, prefix = new_database(postgres), new_database(postgres), unique("toast").replace("-", "_")
    lake = tmp_path / "lake"
    tables = ("docs", "docs_full")
    with psycopg.connect(postgres.dsn(dbname), autocommit=True) as db, \
            psycopg.connect(postgres.dsn(replica), autocommit=True) as db_b:
        for t in tables:
            db.execute(TOAST_DDL.format(t=t))
            db.execute(f"INSERT INTO {t} SELECT g, 0, {BIG} || g, jsonb_build_object('blob', {BIG}, 'g', g) "
                       f"FROM generate_series(1, 3) g")
        db.execute("ALTER TABLE docs_full REPLICA IDENTITY FULL")
        # the values are stored out of line, so an update that leaves them alone does not resend them
        sizes = fetch_one(db, "SELECT min(pg_column_size(body)), min(pg_column_size(meta)) FROM docs")
        assert min(sizes) > 2048, sizes
        names = [unique("cdc"), unique("lake"), unique("replica")]
        connect.create(names[0], cdc_source(postgres, dbname, prefix))
        # topics.regex: new topics are found on the next metadata refresh
        connect.create(names[1], {"connector.class": "SparkParquetSink", "topics.regex": rf"{prefix}\.public\..*",
                                  "lake.path": str(lake), "topics.dir": "tables", "cdc.mode": "upsert",
                                  "cdc.buckets": "2", "rotate.schedule.interval.ms": "1000",
                                  "table.name.format": "${topic}", "consumer.override.metadata.max.age.ms": "1000",
                                  **SCHEMAS})
        connect.create(names[2], {
            "connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector",
            "connection.url": f"jdbc:postgresql://{postgres.host}:{postgres.port}/{replica}",
            "connection.username": postgres.user, "connection.password": postgres.password or "",
            "topics.regex": rf"{prefix}\.public\..*", "insert.mode": "upsert", "primary.key.mode": "record_key",
            "table.name.format": "${source.schema}.${source.table}",
            "consumer.override.metadata.max.age.ms": "1000", **SCHEMAS})

        def source_rows(t: str) -> dict[int, tuple]:
            return {r[0]: r[1:] for r in db.execute(f"SELECT id, n, body, meta::text FROM {t}").fetchall()}

        def lake_rows(t: str) -> dict[int, tuple] | None:  # jsonb arrives as Postgres's own text of it
            rows = collected(spark, lake / "tables" / f"{prefix}.public.{t}")
            return None if rows is None else {r["id"]: (r["n"], r["body"], r["meta"]) for r in rows}

        def replica_rows(t: str) -> dict[int, tuple] | None:
            try:
                return {r[0]: r[1:] for r in db_b.execute(f"SELECT id, n, body, meta::text FROM {t}").fetchall()}
            except psycopg.errors.UndefinedTable:
                return None

        def same() -> bool:
            return all(lake_rows(t) == source_rows(t) and replica_rows(t) == source_rows(t) for t in tables)

        def short(rows: dict[int, tuple] | None) -> object:
            return rows and {k: tuple(v if not isinstance(v, str) else (len(v), v[:12], v[-12:]) for v in row)
                             for k, row in sorted(rows.items())}

        def differences() -> str:
            return connect.log_text(True)[-2000:] + "".join(
                f"\n{t}: source {short(source_rows(t))}\n  lake {short(lake_rows(t))}\n  replica "
                f"{short(replica_rows(t))}" for t in tables)

        wait_for(same, 120, 1.0, "the snapshot in the lake and the replica", differences)
        for t in tables:
            db.execute(f"UPDATE {t} SET n = n + 1")  # the big values are left alone: pgoutput does not resend them
            with db.transaction():  # a row inserted and updated in one flush
                db.execute(f"INSERT INTO {t} VALUES (4, 0, {BIG}, jsonb_build_object('blob', {BIG}))")
            db.execute(f"UPDATE {t} SET n = 5 WHERE id = 4")
        wait_for(same, 90, 1.0, "the updates in the lake and the replica", differences)
        got_lake = {t: lake_rows(t) for t in tables}
        got_replica = {t: replica_rows(t) for t in tables}
        want = {t: source_rows(t) for t in tables}
        with TopicReader(connect.bootstrap, f"{prefix}.public.docs") as reader:
            events = [m.value for m in reader.read(8, 30)]
        for name in names:
            connect.ok("DELETE", f"/connectors/{name}", expect=204)
    for t in tables:
        assert got_replica[t] == want[t], t
        assert got_lake[t] == want[t], t
        assert all(n == (5 if k == 4 else 1) and len(body) > 4000 for k, (n, body, _) in want[t].items())
    # the source did send the placeholder for the default replica identity: the sinks are what kept the values
    assert any(b"__debezium_unavailable_value" in v for v in events if v), "no update carried the placeholder"


def test_upsert_fills_unavailable_values_of_every_shape_and_nulls_them_without_an_earlier_row(
        spark, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The sink task in this process (the test's Spark session): the placeholder as text, bytes and a
    one-element array; kept from the lake, from an earlier change in the same flush, or left null (with a
    warning and a count) for a key the lake never had."""
    from headwater.connect.api import SinkRecord
    from headwater.connectors.spark.sink import SparkParquetSinkTask

    unavailable = "__debezium_unavailable_value"  # Debezium's unavailable.value.placeholder
    task = SparkParquetSinkTask()
    task.start({"connector.class": "SparkParquetSink", "name": "toast", "topics": "t", "lake.path": str(tmp_path),
                "cdc.mode": "upsert", "cdc.buckets": "1", "flush.size": "3"})
    lsn = iter(range(100, 200))

    def change(offset: int, op: str, row: dict) -> SinkRecord:
        value = {"op": op, "before": None, "after": row, "source": {"lsn": next(lsn)}}
        return SinkRecord("t", value, {"id": row["id"]}, 0, None, None, 0, [], offset)

    gone = {"body": unavailable, "blob": unavailable.encode(), "tags": [unavailable]}
    try:
        task.put([change(0, "c", {"id": 1, "n": 0, "body": "one", "blob": b"\x01", "tags": ["a"]}),
                  change(1, "c", {"id": 2, "n": 0, "body": "two", "blob": b"\x02", "tags": ["b"]}),
                  change(2, "u", {"id": 1, "n": 1, **gone})])  # kept from the same flush
        task._wait()
        with caplog.at_level("WARNING"):
            task.put([change(3, "u", {"id": 2, "n": 1, **gone}),  # kept from the lake
                      change(4, "u", {"id": 3, "n": 1, **gone}),  # no earlier row anywhere: nulls
                      change(5, "u", {"id": 1, "n": 2, "body": "new", "blob": unavailable.encode(),
                                      "tags": [unavailable]})])
            task._wait()
        got = {r["id"]: (r["n"], r["body"], None if r["blob"] is None else bytes(r["blob"]), r["tags"])
               for r in spark.read.parquet(str(tmp_path / "topics" / "t")).collect()}
        figures = task.metrics()
    finally:
        task.stop()
    assert got == {1: (2, "new", b"\x01", ["a"]), 2: (1, "two", b"\x02", ["b"]), 3: (1, None, None, None)}
    assert figures["rows.unavailable.values"] == 1
    assert any("unavailable values" in r.getMessage() and "'id': 3" in r.getMessage() for r in caplog.records)


def test_connect_time_types_of_time_precision_mode_connect(spark, tmp_path: Path) -> None:
    """What ``time.precision.mode=connect`` sends: Connect's Date, Time and Timestamp (Spark cannot write
    a Connect Time as TIME: it becomes milliseconds since midnight), beside Debezium's MicroTimestamp."""
    from headwater.connect.api import SinkRecord
    from headwater.connect.api.data import Schema, SchemaBuilder, SchemaType, Struct
    from headwater.connect.api.logical import DATE_SCHEMA, TIME_SCHEMA, TIMESTAMP_SCHEMA
    from headwater.connectors.spark.sink import SparkParquetSinkTask

    schema = (SchemaBuilder.struct().field("id", Schema(SchemaType.INT32)).field("d", DATE_SCHEMA)
              .field("tm", TIME_SCHEMA).field("at", TIMESTAMP_SCHEMA)
              .field("wall", Schema(SchemaType.INT64, name="io.debezium.time.MicroTimestamp", version=1)).build())
    value = Struct(schema, {"id": 1, "d": dt.date(2024, 1, 2), "tm": dt.time(12, 34, 56, 789000),
                            "at": dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC), "wall": 1704164645123456})
    task = SparkParquetSinkTask()
    task.start({"connector.class": "SparkParquetSink", "name": "times", "topics": "t", "lake.path": str(tmp_path),
                "flush.size": "1"})
    try:
        task.put([SinkRecord("t", value, None, 0, None, schema, 0, [], 0)])
        task._wait()
    finally:
        task.stop()
    df = spark.read.parquet(str(tmp_path / "topics" / "t"))
    assert {f.name: f.dataType.simpleString() for f in df.schema.fields} == {
        "id": "int", "d": "date", "tm": "int", "at": "timestamp", "wall": "timestamp_ntz", "partition": "int"}
    row = df.selectExpr("d", "tm", "cast(wall as string) AS wall", "unix_timestamp(at) AS at").first()
    assert (row["d"], row["tm"], row["wall"], row["at"]) == (
        dt.date(2024, 1, 2), 45296789, "2024-01-02 03:04:05.123456", 1704164645)
