"""Postgres A -> CDC source -> topics -> Postgres sink -> Postgres B, through real workers: after a
workload of mixed transactions (inserts, updates including primary-key changes, deletes, a truncate,
an ALTER TABLE), B's tables equal A's row for row."""

from __future__ import annotations

import base64
import json
import random
import time
import uuid

import psycopg
import pytest
from support.connectproc import ConnectProcess, TopicReader, module_connect, unique, wait_for
from support.pgserver import fetch_one
from test_postgres_cdc import source

pytestmark = pytest.mark.timeout(300)

connect = module_connect("postgres-replication")
JSON = {"key.converter": "org.apache.kafka.connect.json.JsonConverter", "key.converter.schemas.enable": "true",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": "true"}
COLUMNS = {"items": "id, name, qty, price, seen, tags", "others": "k, v"}


def databases(postgres) -> tuple[str, str]:
    a, b = "a_" + uuid.uuid4().hex[:8], "b_" + uuid.uuid4().hex[:8]
    with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {a}")
        conn.execute(f"CREATE DATABASE {b}")
    return a, b


def workload(db: psycopg.Connection, transactions: int, seed: int = 7) -> dict[str, int]:
    rng = random.Random(seed)
    ids: list[int] = []
    next_id, counts = 1, {"insert": 0, "update": 0, "key change": 0, "delete": 0, "truncate": 0, "alter": 0}
    for n in range(transactions):
        with db.transaction():
            if n == transactions // 2:
                db.execute("ALTER TABLE items ADD COLUMN note text")
                COLUMNS["items"] = "id, name, qty, price, seen, tags, note"
                counts["alter"] += 1
            if n == (3 * transactions) // 4:
                db.execute("TRUNCATE others")
                counts["truncate"] += 1
            for _ in range(rng.randint(1, 5)):
                roll = rng.random()
                if roll < 0.45 or len(ids) < 5:
                    db.execute("INSERT INTO items (id, name, qty, price, seen, tags) VALUES (%s, %s, %s, %s, now(), "
                               "%s)", (next_id, f"item {next_id}", rng.randint(0, 99), rng.randint(0, 99999) / 100,
                                       [f"t{rng.randint(0, 9)}"]))
                    db.execute("INSERT INTO others VALUES (%s, %s) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
                               (f"k{next_id % 50}", f'{{"n": {next_id}}}'))
                    ids.append(next_id)
                    next_id += 1
                    counts["insert"] += 1
                elif roll < 0.75:
                    i = rng.choice(ids)
                    db.execute("UPDATE items SET qty = qty + 1, name = %s WHERE id = %s", (f"upd {n}", i))
                    if "note" in COLUMNS["items"]:
                        db.execute("UPDATE items SET note = %s WHERE id = %s", (f"note {n}", i))
                    counts["update"] += 1
                elif roll < 0.85:
                    i = ids.pop(rng.randrange(len(ids)))
                    db.execute("UPDATE items SET id = %s WHERE id = %s", (next_id, i))  # a primary-key change
                    ids.append(next_id)
                    next_id += 1
                    counts["key change"] += 1
                else:
                    i = ids.pop(rng.randrange(len(ids)))
                    db.execute("DELETE FROM items WHERE id = %s", (i,))
                    counts["delete"] += 1
    return counts


def rows(db: psycopg.Connection, table: str) -> list[tuple]:
    key = COLUMNS[table].split(",")[0]
    return db.execute(f"SELECT {COLUMNS[table]} FROM {table} ORDER BY {key}").fetchall()


def test_a_to_b_table_for_table(connect: ConnectProcess, postgres) -> None:
    a, b = databases(postgres)
    prefix = unique("rep")
    COLUMNS["items"] = "id, name, qty, price, seen, tags"
    with psycopg.connect(postgres.dsn(a), autocommit=True) as db_a, \
            psycopg.connect(postgres.dsn(b), autocommit=True) as db_b:
        db_a.execute("CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, qty int, price numeric(10,2), "
                     "seen timestamptz, tags text[])")
        db_a.execute("CREATE TABLE others (k text PRIMARY KEY, v jsonb)")
        db_a.execute("INSERT INTO items VALUES (0, 'before the snapshot', 1, 2.50, now(), '{a}')")
        src, sink = unique("rep-src"), unique("rep-sink")
        connect.create(src, source(postgres, a, prefix, **JSON, **{"skipped.operations": "none"}))
        connect.create(sink, {"connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector",
                              "connection.url": f"jdbc:postgresql://{postgres.host}:{postgres.port}/{b}",
                              "connection.username": postgres.user, "connection.password": postgres.password or "",
                              "topics.regex": rf"{prefix}\.public\..*", "insert.mode": "upsert",
                              "primary.key.mode": "record_key", "delete.enabled": "true",
                              "table.name.format": "${source.schema}.${source.table}",
                              "consumer.override.metadata.max.age.ms": "1000", **JSON})
        connect.wait_state(src, "RUNNING", tasks=1)
        started = time.monotonic()
        counts = workload(db_a, 10_000)
        took = time.monotonic() - started

        def same() -> bool:
            try:
                return all(rows(db_a, t) == rows(db_b, t) for t in COLUMNS)
            except psycopg.errors.UndefinedTable:
                return False
            except psycopg.errors.UndefinedColumn:
                return False

        wait_for(same, 120, 0.5, "B's tables to equal A's", connect.log_text)
        caught_up = time.monotonic() - started
        sizes = {t: len(rows(db_a, t)) for t in COLUMNS}
        status = [connect.status(n)["tasks"][0]["state"] for n in (src, sink)]
        for name in (src, sink):
            connect.ok("DELETE", f"/connectors/{name}", expect=204)
    print(f"\nA -> B: 10,000 transactions {counts} in {took:.1f}s; B equal to A after {caught_up:.1f}s; rows {sizes}")
    assert status == ["RUNNING", "RUNNING"]
    assert sizes["items"] > 100 and counts["truncate"] == 1 and counts["key change"] > 50


@pytest.fixture(scope="module")
def fast_broker(tmp_path_factory: pytest.TempPathFactory):
    """A broker that allows the workers' short session timeouts (fast failover)."""
    from support.brokerproc import BrokerProcess
    from support.workerproc import BROKER_OVERRIDES

    with BrokerProcess(tmp_path_factory.mktemp("broker") / "data", *BROKER_OVERRIDES, "num.partitions=1") as proc:
        yield proc


def test_a_to_b_with_the_source_worker_killed_mid_stream(fast_broker, postgres, tmp_path) -> None:
    """Distributed mode: two workers; the worker running the CDC source task is SIGKILLed while the
    workload runs; the task moves to the other worker and resumes from the stored offset; B equals A."""
    import threading

    from support.workerproc import Cluster

    a, b = databases(postgres)
    prefix = unique("repk")
    COLUMNS["items"] = "id, name, qty, price, seen, tags"
    with Cluster(tmp_path, fast_broker.bootstrap) as cluster, \
            psycopg.connect(postgres.dsn(a), autocommit=True) as db_a, \
            psycopg.connect(postgres.dsn(b), autocommit=True) as db_b:
        db_a.execute("CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, qty int, price numeric(10,2), "
                     "seen timestamptz, tags text[])")
        db_a.execute("CREATE TABLE others (k text PRIMARY KEY, v jsonb)")
        cluster.start(2)
        src, sink = unique("repk-src"), unique("repk-sink")
        cluster.leader().ok("POST", "/connectors", {"name": src, "config": source(
            postgres, a, prefix, **JSON, **{"skipped.operations": "none"})}, expect=201)
        cluster.leader().ok("POST", "/connectors", {"name": sink, "config": {
            "connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector",
            "connection.url": f"jdbc:postgresql://{postgres.host}:{postgres.port}/{b}?user={postgres.user}",
            "topics.regex": rf"{prefix}\.public\..*", "table.name.format": "${source.schema}.${source.table}",
            "consumer.override.metadata.max.age.ms": "1000", **JSON}}, expect=201)
        st = cluster.wait_running(src, 1, timeout=60)
        cluster.wait_running(sink, 1, timeout=60)
        source_worker = cluster.by_id(st["tasks"][0]["worker_id"])

        done: dict[str, dict[str, int]] = {}
        feeder = threading.Thread(target=lambda: done.setdefault("counts", workload(
            psycopg.connect(postgres.dsn(a), autocommit=True), 4000, seed=11)))
        feeder.start()
        time.sleep(1.0)  # the workload is flowing
        source_worker.kill()
        killed_at = time.monotonic()
        feeder.join(120)
        st = cluster.wait_running(src, 1, timeout=60)
        moved = time.monotonic() - killed_at
        assert st["tasks"][0]["worker_id"] != source_worker.worker_id

        def same() -> bool:
            try:
                return all(rows(db_a, t) == rows(db_b, t) for t in COLUMNS)
            except (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedColumn):
                return False

        wait_for(same, 120, 0.5, "B's tables to equal A's after the kill", cluster.logs)
        equal_after = time.monotonic() - killed_at
        sizes = {t: len(rows(db_a, t)) for t in COLUMNS}
    print(f"\nA -> B with the source worker killed: {done['counts']}; task RUNNING elsewhere {moved:.1f}s after "
          f"the kill; B equal to A {equal_after:.1f}s after it; rows {sizes}")
    assert sizes["items"] > 100


def test_a_to_b_through_extract_new_record_state(connect: ConnectProcess, postgres) -> None:
    """The sink also takes plain rows: with Debezium's ExtractNewRecordState on the sink's side
    (deletes as tombstones, op and table added as fields), B still equals A; the extra fields land as
    columns."""
    a, b = databases(postgres)
    prefix = unique("unw")
    COLUMNS["items"] = "id, name, qty, price, seen, tags"
    with psycopg.connect(postgres.dsn(a), autocommit=True) as db_a, \
            psycopg.connect(postgres.dsn(b), autocommit=True) as db_b:
        db_a.execute("CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, qty int, price numeric(10,2), "
                     "seen timestamptz, tags text[])")
        db_a.execute("CREATE TABLE others (k text PRIMARY KEY, v jsonb)")
        src, sink = unique("unw-src"), unique("unw-sink")
        connect.create(src, source(postgres, a, prefix, **JSON))
        connect.create(sink, {"connector.class": "JdbcSinkConnector",
                              "connection.url": f"jdbc:postgresql://{postgres.host}:{postgres.port}/{b}"
                                                f"?user={postgres.user}",
                              "topics.regex": rf"{prefix}\.public\..*", "table.name.format": "${topic}",
                              "transforms": "unwrap,route",
                              "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
                              "transforms.unwrap.delete.tombstone.handling.mode": "tombstone",
                              "transforms.unwrap.add.fields": "op,table",
                              "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
                              "transforms.route.regex": r"[^.]+\.([^.]+)\.([^.]+)",
                              "transforms.route.replacement": "$1.$2",
                              "consumer.override.metadata.max.age.ms": "1000", **JSON})
        connect.wait_state(src, "RUNNING", tasks=1)
        counts = workload(db_a, 1000, seed=3)

        def same() -> bool:
            try:
                return all(rows(db_a, t) == rows(db_b, t) for t in COLUMNS)
            except (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedColumn):
                return False

        wait_for(same, 120, 0.5, "B's tables to equal A's", connect.log_text)
        ops: dict[str, int] = dict(db_b.execute("SELECT __op, count(*) FROM items GROUP BY 1").fetchall())
        table = db_b.execute("SELECT DISTINCT __table FROM items").fetchall()
        for name in (src, sink):
            connect.ok("DELETE", f"/connectors/{name}", expect=204)
    assert counts["delete"] > 0 and set(ops) <= {"c", "u"} and table == [("items",)]


def test_unavailable_values_are_left_out_of_the_writes(postgres, caplog: pytest.LogCaptureFixture) -> None:
    """The sink task in this process: a column holding Debezium's placeholder keeps the table's value, the
    value of a change earlier in the same put, or (a key the table never had) NULL with a warning."""
    from headwater.connect.api import SinkRecord
    from headwater.connectors.postgres.sink import PostgresSinkTask

    _, b = databases(postgres)
    unavailable = "__debezium_unavailable_value"
    task = PostgresSinkTask()
    task.start({"connector.class": "JdbcSinkConnector", "name": "toast", "topics": "t", "table.name.format": "docs",
                "connection.url": f"jdbc:postgresql://{postgres.host}:{postgres.port}/{b}",
                "connection.username": postgres.user, "connection.password": postgres.password or ""})
    offsets = iter(range(100))

    def change(op: str, key: int, n: int, body: str, meta: str) -> SinkRecord:
        value = {"op": op, "before": None, "after": {"id": key, "n": n, "body": body, "meta": meta},
                 "source": {"schema": "public", "table": "docs"}}
        return SinkRecord("t", value, {"id": key}, 0, None, None, 0, [], next(offsets))

    gone = (unavailable, unavailable)
    try:
        task.put([change("c", 1, 0, "big 1", '{"a": 1}'), change("c", 2, 0, "big 2", '{"a": 2}')])
        with caplog.at_level("WARNING"):
            task.put([change("u", 1, 1, *gone),  # kept from the table
                      change("c", 3, 0, "big 3", '{"a": 3}'), change("u", 3, 1, *gone),  # from the same put
                      change("u", 2, 1, "new 2", unavailable),  # one column kept, the other written
                      change("u", 4, 1, *gone)])  # no earlier row: NULL
    finally:
        task.stop()
    with psycopg.connect(postgres.dsn(b)) as db:
        # schemaless values: the sink made every column text
        got = db.execute("SELECT id::int, n::int, body, meta FROM docs ORDER BY id::int").fetchall()
    assert got == [(1, 1, "big 1", '{"a": 1}'), (2, 1, "new 2", '{"a": 2}'), (3, 1, "big 3", '{"a": 3}'),
                   (4, 1, None, None)]
    assert any("left NULL" in r.getMessage() and "4" in r.getMessage() for r in caplog.records)


TOASTED = {"b": "bytea", "t": "text[]", "i": "int[]"}  # each NOT NULL (b, t, i) and nullable (b_n, t_n, i_n)
BIG = {  # random, over 2 kB each, stored out of line (STORAGE EXTERNAL: no compression)
    "bytea": "(SELECT decode(string_agg(md5(random()::text), ''), 'hex') FROM generate_series(1, 200))",
    "text[]": "(SELECT array_agg(md5(random()::text)) FROM generate_series(1, 100))",
    "int[]": "(SELECT array_agg((random() * 2e9)::int) FROM generate_series(1, 1000))"}


def test_unchanged_toast_bytea_and_arrays_stream_as_debeziums_placeholder_and_the_sink_keeps_them(
        connect: ConnectProcess, postgres) -> None:
    """An update that leaves large NOT NULL and nullable bytea, text[] and int[] values alone (pgoutput does not
    resend them): the source sends Debezium's placeholder in each column's shape and keeps RUNNING (the issue: a
    NOT NULL bytea or array column got null and failed the task), the sink keeps the stored values; under
    REPLICA IDENTITY FULL the values come from the old row, as Debezium's do."""
    a, b = databases(postgres)
    prefix = unique("toast")
    columns = [(name + suffix, type_) for name, type_ in TOASTED.items() for suffix in ("", "_n")]
    select = "SELECT id, n, " + ", ".join(name for name, _ in columns) + " FROM {t} ORDER BY id"
    tables = ("blobs", "blobs_full")
    with psycopg.connect(postgres.dsn(a), autocommit=True) as db_a, \
            psycopg.connect(postgres.dsn(b), autocommit=True) as db_b:
        for t in tables:
            db_a.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, n int, " + ", ".join(
                f"{name} {type_}" + ("" if name.endswith("_n") else " NOT NULL") for name, type_ in columns) + ")")
            for name, _ in columns:
                db_a.execute(f"ALTER TABLE {t} ALTER COLUMN {name} SET STORAGE EXTERNAL")
            db_a.execute(f"INSERT INTO {t} SELECT g, 0, " + ", ".join(BIG[type_] for _, type_ in columns)
                         + " FROM generate_series(1, 2) g")
        db_a.execute("ALTER TABLE blobs_full REPLICA IDENTITY FULL")
        sizes = fetch_one(db_a, "SELECT " + ", ".join(f"min(pg_column_size({n}))" for n, _ in columns)
                          + " FROM blobs")
        assert min(sizes) > 2048, sizes
        src, sink = unique("toast-src"), unique("toast-sink")
        connect.create(src, source(postgres, a, prefix, **JSON))
        connect.create(sink, {"connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector",
                              "connection.url": f"jdbc:postgresql://{postgres.host}:{postgres.port}/{b}",
                              "connection.username": postgres.user, "connection.password": postgres.password or "",
                              "topics.regex": rf"{prefix}\.public\..*", "insert.mode": "upsert",
                              "primary.key.mode": "record_key", "table.name.format": "${source.schema}.${source.table}",
                              "consumer.override.metadata.max.age.ms": "1000", **JSON})

        def same() -> bool:
            try:
                return all(db_a.execute(select.format(t=t)).fetchall() == db_b.execute(select.format(t=t)).fetchall()
                           for t in tables)
            except psycopg.errors.UndefinedTable:
                return False

        wait_for(same, 60, 0.5, "the snapshot in B", lambda: connect.log_text(True)[-3000:])
        for t in tables:
            db_a.execute(f"UPDATE {t} SET n = n + 1")  # the large values are left alone
        got = {}
        for t in tables:  # the snapshot's two reads, then the two updates
            with TopicReader(connect.bootstrap, f"{prefix}.public.{t}") as reader:
                read = [json.loads(m.value or b"")["payload"] for m in reader.read(4, 30)]
            task = connect.status(src)["tasks"][0]
            assert len(read) == 4, (t, len(read), task["state"], task.get("trace", "")[-1500:])
            got[t] = read[2:]
        wait_for(lambda: same() and db_b.execute("SELECT min(n) FROM blobs_full").fetchone() == (1,), 60, 0.5,
                 "the updates in B", lambda: connect.log_text(True)[-3000:])
        state = connect.status(src)["tasks"][0]["state"]
        stored = {t: db_a.execute(f"SELECT id, b, t, i FROM {t} ORDER BY id").fetchall() for t in tables}
        for name in (src, sink):
            connect.ok("DELETE", f"/connectors/{name}", expect=204)
    assert state == "RUNNING"
    unavailable = "__debezium_unavailable_value"
    shapes = {"b": base64.b64encode(unavailable.encode()).decode(), "t": [unavailable],
              "i": list(unavailable.encode())}  # Debezium's: bytea's bytes, text[]'s one text, int[]'s bytes as ints
    for update in got["blobs"]:
        assert update["op"] == "u" and update["after"]["n"] == 1, update
        assert {c: update["after"][c] for c in shapes} == shapes
        assert {c: update["after"][c + "_n"] for c in shapes} == shapes
    for update, (key, blob, texts, ints) in zip(got["blobs_full"], stored["blobs_full"], strict=True):
        assert update["after"]["id"] == key and update["after"]["n"] == 1
        assert (update["after"]["b"], update["after"]["t"], update["after"]["i"]) == (
            base64.b64encode(blob).decode(), texts, ints), key  # the old row's values, not the placeholder
