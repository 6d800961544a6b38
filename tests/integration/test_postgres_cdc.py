"""Postgres CDC through ``headwater up``: a real PostgreSQL (tests/support/pgserver.py), the real broker and
worker; Debezium's topics, keys and envelopes; snapshot, then streaming with no gap and no overlap."""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg
import pytest
from support.connectproc import ConnectProcess, TopicReader, module_connect, scrape_metrics, unique, wait_for
from support.pgserver import fetch_one

pytestmark = pytest.mark.timeout(180)

connect = module_connect("postgres-cdc")
JSON_PLAIN = {"key.converter": "org.apache.kafka.connect.json.JsonConverter", "key.converter.schemas.enable": "false",
              "value.converter": "org.apache.kafka.connect.json.JsonConverter",
              "value.converter.schemas.enable": "false"}


@pytest.fixture
def database(postgres) -> str:
    return postgres.new_database("cdc")


def source(postgres, database: str, prefix: str, **extra: str) -> dict[str, str]:
    return {"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": postgres.host, "database.port": str(postgres.port),
            "database.user": postgres.user, "database.password": postgres.password or "",
            "database.dbname": database, "topic.prefix": prefix, "plugin.name": "pgoutput",
            "slot.name": f"slot_{uuid.uuid4().hex[:8]}", "publication.name": f"pub_{uuid.uuid4().hex[:6]}",
            **JSON_PLAIN, **extra}


def events(reader: TopicReader, count: int, timeout: float = 30) -> list[tuple[Any, Any]]:
    msgs = reader.read(count, timeout)
    assert len(msgs) >= count, f"{len(msgs)} of {count} events: {[m.value for m in msgs]}"
    return [(json.loads(m.key) if m.key else None, json.loads(m.value) if m.value else None) for m in msgs]


def test_snapshot_then_streaming_in_debeziums_shape(connect: ConnectProcess, postgres, database: str) -> None:
    prefix = unique("pg")
    with psycopg.connect(postgres.dsn(database), autocommit=True) as db:
        db.execute("CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, price numeric(8,2), "
                   "seen timestamptz, day date, tags text[])")
        db.execute("INSERT INTO items VALUES (1, 'one', 1.50, '2024-05-06 07:08:09.5+00', '2024-05-06', "
                   "'{a,b}'), (2, 'two', NULL, NULL, NULL, NULL)")
        name = unique("pg-src")
        connect.create(name, source(postgres, database, prefix))
        connect.wait_state(name, "RUNNING", tasks=1)
        topic = f"{prefix}.public.items"
        with TopicReader(connect.bootstrap, topic) as reader:
            snap = events(reader, 2)
            assert [k for k, _ in snap] == [{"id": 1}, {"id": 2}]
            first = snap[0][1]
            assert first["op"] == "r" and first["before"] is None
            assert first["after"]["name"] == "one" and first["after"]["day"] == 19849
            assert first["after"]["seen"] == "2024-05-06T07:08:09.5Z" and first["after"]["tags"] == ["a", "b"]
            src = first["source"]
            assert src["connector"] == "postgresql" and src["name"] == prefix and src["db"] == database
            assert (src["schema"], src["table"], src["snapshot"]) == ("public", "items", "first")
            assert snap[1][1]["source"]["snapshot"] == "last"

            db.execute("INSERT INTO items (id, name) VALUES (3, 'three')")
            db.execute("UPDATE items SET name = 'uno' WHERE id = 1")
            db.execute("DELETE FROM items WHERE id = 2")
            db.execute("UPDATE items SET id = 4 WHERE id = 3")
            stream = events(reader, 2 + 7)[2:]
        ops = [(v or {}).get("op") for _, v in stream]
        assert ops == ["c", "u", "d", None, "d", None, "c"], stream
        assert stream[0][1]["after"]["name"] == "three" and stream[0][1]["source"]["snapshot"] == "false"
        assert stream[1][1]["after"]["name"] == "uno" and stream[1][0] == {"id": 1}
        assert stream[2][1]["before"]["id"] == 2 and stream[3] == ({"id": 2}, None)  # delete, then tombstone
        assert stream[4][0] == {"id": 3} and stream[6][0] == {"id": 4}  # a key change: delete, tombstone, create
        assert all(v["source"]["txId"] and v["source"]["lsn"] for _, v in stream if v)
        connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_a_killed_worker_resumes_from_its_offsets_and_the_slot_advances(postgres, database: str,
                                                                        tmp_path) -> None:
    prefix, slot = unique("pgk"), f"slot_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres.dsn(database), autocommit=True) as db, \
            ConnectProcess(tmp_path / "up") as proc:
        db.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
        name = unique("pg-kill")
        proc.create(name, source(postgres, database, prefix, **{"slot.name": slot}))
        proc.wait_state(name, "RUNNING", tasks=1)

        def insert(first: int, last: int) -> None:
            for start in range(first, last + 1, 10):
                with db.transaction():
                    db.execute("INSERT INTO t SELECT g, 'v' || g FROM generate_series(%s::int, %s::int) g",
                               (start, min(start + 9, last)))

        def slot_lsn() -> int:
            return int(fetch_one(db, "SELECT confirmed_flush_lsn - '0/0' FROM pg_replication_slots "
                                     "WHERE slot_name = %s", (slot,))[0])

        topic = f"{prefix}.public.t"
        insert(1, 100)
        with TopicReader(proc.bootstrap, topic) as reader:
            events(reader, 100)
        before = slot_lsn()
        wait_for(lambda: slot_lsn() > before or None, 20, 0.2, "the slot's confirmed LSN to advance",
                 proc.log_text)  # confirmed only once the worker stored the offsets
        proc.restart(kill=True)  # SIGKILL: nothing flushed on the way out
        insert(101, 200)  # while the worker is down
        proc.wait_state(name, "RUNNING", tasks=1, timeout=60)
        insert(201, 250)
        with TopicReader(proc.bootstrap, topic) as reader:
            got = events(reader, 250, timeout=60)
        ids = [v["after"]["id"] for _, v in got if v and v["op"] == "c"]
        assert set(ids) == set(range(1, 251)), sorted(set(range(1, 251)) - set(ids))  # nothing lost
        print(f"\nkilled worker: 250 rows, {len(ids)} create events, {len(ids) - 250} replayed")


def test_a_restart_without_stored_offsets_keeps_the_slot_and_loses_no_delete(postgres, database: str,
                                                                             tmp_path) -> None:
    """At least once, a task killed before its first offset flush left changes sent but no offset: the next
    task snapshots again, but keeps the slot and replays from it, so a delete made while the worker was down
    reaches the topic (a new slot would begin after it: the deleted row, sent before, would stay downstream)."""
    prefix, slot = unique("pgn"), f"slot_{uuid.uuid4().hex[:8]}"
    never = {"offset.flush.interval.ms": "3600000"}  # no offset is stored before the kill
    with psycopg.connect(postgres.dsn(database), autocommit=True) as db, \
            ConnectProcess(tmp_path / "up", settings=never) as proc:
        db.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")  # empty: the snapshot stores no offset
        name = unique("pg-nooffset")
        proc.create(name, source(postgres, database, prefix, **{"slot.name": slot}))
        proc.wait_state(name, "RUNNING", tasks=1)
        topic = f"{prefix}.public.t"
        db.execute("INSERT INTO t VALUES (1, 'one'), (2, 'two')")
        with TopicReader(proc.bootstrap, topic) as reader:
            events(reader, 2)
        proc.kill()  # SIGKILL: the two creates were sent, their offsets never stored
        db.execute("DELETE FROM t WHERE id = 1")  # while the worker is down
        proc.start()
        proc.wait_state(name, "RUNNING", tasks=1, timeout=60)
        db.execute("INSERT INTO t VALUES (3, 'three')")

        def deleted() -> list[Any] | None:
            with TopicReader(proc.bootstrap, topic) as reader:
                got = [(json.loads(m.key or b"null"), json.loads(m.value)) for m in reader.read(100, 3) if m.value]
            created = {v["after"]["id"] for _, v in got if v["op"] in ("c", "r")}
            return got if 3 in created and any(v["op"] == "d" and v["before"]["id"] == 1 for _, v in got) else None

        got = wait_for(deleted, 60, 0.5, "the delete made while the worker was down", proc.log_text)
        last = {}
        for key, value in got:  # the topic replayed in order ends at A's state
            last[key["id"]] = value["op"]
        assert {k for k, op in last.items() if op != "d"} == {2, 3}, last


TYPES_DDL = """
CREATE TYPE mood AS ENUM ('sad', 'happy');
CREATE TABLE typed (
  id int PRIMARY KEY, i2 smallint, i8 bigint, f4 real, f8 double precision, num numeric(10,3), numu numeric,
  b boolean, t text, vc varchar(5), ch char(3), bin bytea, d date, tm time, tm3 time(3), ts timestamp,
  ts3 timestamp(3), tz timestamptz, tmz timetz, iv interval, u uuid, j json, jb jsonb, e mood, ai int[],
  at text[], pt point, ip inet
)"""
TYPES_ROW = ("%s, 7, 9000000000, 1.5, 2.25, 12.345, 3.14, true, 'héllo', 'abc', 'ab', '\\x0102ff', '2024-01-02', "
             "'12:34:56.789', '12:34:56.789', '2024-01-02 03:04:05.123456', '2024-01-02 03:04:05.123', "
             "'2024-01-02 03:04:05+02', '03:04:05+02', '1 day 02:00:00', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', "
             "'{\"a\":1}', '{\"a\":1}', 'happy', '{1,2,NULL}', '{\"a b\",c}', '(1,2)', '10.0.0.1'")


def _b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode()


EXPECTED = {
    "i2": (7, "int16", None), "i8": (9000000000, "int64", None), "f4": (1.5, "float", None),
    "f8": (2.25, "double", None),
    "num": (_b64((12345).to_bytes(2, "big")), "bytes", "org.apache.kafka.connect.data.Decimal"),
    "numu": ({"scale": 2, "value": _b64((314).to_bytes(2, "big"))}, "struct", "io.debezium.data.VariableScaleDecimal"),
    "b": (True, "boolean", None), "t": ("héllo", "string", None), "vc": ("abc", "string", None),
    "ch": ("ab ", "string", None), "bin": (_b64(b"\x01\x02\xff"), "bytes", None),
    "d": (19724, "int32", "io.debezium.time.Date"), "tm": (45296789000, "int64", "io.debezium.time.MicroTime"),
    "tm3": (45296789, "int32", "io.debezium.time.Time"),
    "ts": (1704164645123456, "int64", "io.debezium.time.MicroTimestamp"),
    "ts3": (1704164645123, "int64", "io.debezium.time.Timestamp"),
    "tz": ("2024-01-02T01:04:05Z", "string", "io.debezium.time.ZonedTimestamp"),
    "tmz": ("01:04:05Z", "string", "io.debezium.time.ZonedTime"),
    "iv": (93600000000, "int64", "io.debezium.time.MicroDuration"),
    "u": ("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "string", "io.debezium.data.Uuid"),
    "j": ('{"a":1}', "string", "io.debezium.data.Json"), "jb": ('{"a": 1}', "string", "io.debezium.data.Json"),
    "e": ("happy", "string", "io.debezium.data.Enum"), "ai": ([1, 2, None], "array", None),
    "at": (["a b", "c"], "array", None), "pt": ("(1,2)", "string", None), "ip": ("10.0.0.1", "string", None),
}


def test_every_mapped_type_snapshot_and_streaming_value_for_value(connect: ConnectProcess, postgres,
                                                                  database: str) -> None:
    prefix = unique("pgt")
    with psycopg.connect(postgres.dsn(database), autocommit=True) as db:
        db.execute(TYPES_DDL)
        db.execute(f"INSERT INTO typed VALUES ({TYPES_ROW})", (1,))
        name = unique("pg-types")
        connect.create(name, source(postgres, database, prefix, **{"value.converter.schemas.enable": "true"}))
        with TopicReader(connect.bootstrap, f"{prefix}.public.typed") as reader:
            events(reader, 1)
            db.execute(f"INSERT INTO typed VALUES ({TYPES_ROW})", (2,))
            got = events(reader, 2)
        connect.ok("DELETE", f"/connectors/{name}", expect=204)
    for (_key, envelope), op in zip(got, ("r", "c"), strict=True):
        payload, schema = envelope["payload"], envelope["schema"]
        assert payload["op"] == op
        assert schema["name"] == f"{prefix}.public.typed.Envelope"
        after_schema = next(f for f in schema["fields"] if f["field"] == "after")
        assert after_schema["name"] == f"{prefix}.public.typed.Value"
        fields = {f["field"]: f for f in after_schema["fields"]}
        assert fields["id"]["optional"] is False and fields["i2"]["optional"] is True
        for column, (value, type_, logical) in EXPECTED.items():
            assert payload["after"][column] == value, (op, column, payload["after"][column])
            assert fields[column]["type"] == type_, (column, fields[column])
            assert fields[column].get("name") == logical, (column, fields[column])
        assert fields["num"]["parameters"] == {"scale": "3", "connect.decimal.precision": "10"}
        assert fields["e"]["parameters"] == {"allowed": "sad,happy"}


def test_a_column_added_mid_stream_shows_in_the_next_change(connect: ConnectProcess, postgres, database: str) -> None:
    prefix = unique("pga")
    with psycopg.connect(postgres.dsn(database), autocommit=True) as db:
        db.execute("CREATE TABLE grows (id int PRIMARY KEY, a text)")
        name = unique("pg-alter")
        connect.create(name, source(postgres, database, prefix, **{"snapshot.mode": "no_data"}))
        connect.wait_state(name, "RUNNING", tasks=1)
        time_to_stream = 2
        import time

        time.sleep(time_to_stream)
        db.execute("INSERT INTO grows VALUES (1, 'x')")
        db.execute("ALTER TABLE grows ADD COLUMN b int NOT NULL DEFAULT 5")
        db.execute("INSERT INTO grows VALUES (2, 'y', 6)")
        with TopicReader(connect.bootstrap, f"{prefix}.public.grows") as reader:
            got = events(reader, 2)
        connect.ok("DELETE", f"/connectors/{name}", expect=204)
    assert got[0][1]["after"] == {"id": 1, "a": "x"}
    assert got[1][1]["after"] == {"id": 2, "a": "y", "b": 6}


def test_an_idle_captured_table_does_not_pin_wal_while_others_write(connect: ConnectProcess, postgres,
                                                                    database: str) -> None:
    """The slot-lag guard: only public.quiet is captured and it stays idle while another table writes
    500 MB of WAL; the slot follows the server's WAL position (keepalives), so it holds back little.
    Heartbeats go to __debezium-heartbeat.<prefix> meanwhile."""
    import time

    prefix, slot = unique("pgw"), f"slot_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres.dsn(database), autocommit=True) as db:
        db.execute("CREATE TABLE quiet (id int PRIMARY KEY)")
        db.execute("CREATE TABLE noise (id int, pad text)")
        name = unique("pg-idle")
        connect.create(name, source(postgres, database, prefix, **{
            "slot.name": slot, "publication.autocreate.mode": "filtered", "table.include.list": "public.quiet",
            "snapshot.mode": "no_data", "heartbeat.interval.ms": "500"}))
        connect.wait_state(name, "RUNNING", tasks=1)

        def retained() -> int:
            row = db.execute("SELECT pg_current_wal_lsn() - confirmed_flush_lsn FROM pg_replication_slots "
                             "WHERE slot_name = %s", (slot,)).fetchone()
            return int(row[0]) if row and row[0] is not None else -1

        wait_for(lambda: retained() >= 0 or None, 20, 0.1, "the slot")
        start = fetch_one(db, "SELECT pg_current_wal_lsn()")[0]
        peak = 0
        for _ in range(25):
            db.execute("INSERT INTO noise SELECT g, repeat('x', 200) FROM generate_series(1, 80000) g")
            peak = max(peak, retained())
            time.sleep(0.2)
        written = int(fetch_one(db, "SELECT pg_current_wal_lsn() - %s::pg_lsn", (str(start),))[0])
        settled = wait_for(lambda: (r := retained()) < (16 << 20) and r + 1, 20, 0.2, "the slot to catch up")
        with TopicReader(connect.bootstrap, f"__debezium-heartbeat.{prefix}") as beats:
            heartbeat = events(beats, 2)
        reported = connect.ok("GET", f"/connectors/{name}/tasks/0/metrics")["metrics"]["streaming"]
        connect.ok("DELETE", f"/connectors/{name}", expect=204)
    print(f"\nidle-table guard: {written >> 20} MiB of WAL written elsewhere; slot retained at most {peak >> 20} MiB "
          f"while it was written, {(settled - 1) >> 10} KiB after")
    assert written >= 500 << 20
    assert peak < 64 << 20, f"the slot held back {peak >> 20} MiB"
    assert heartbeat[0][0] == {"serverName": prefix} and heartbeat[0][1]["ts_ms"] > 0
    # the task's own reading, as the metrics endpoint serves it
    assert reported["events"] == 0 and reported["retained.wal.checked.ms"] > 0, reported
    assert 0 <= reported["retained.wal.bytes"] < 64 << 20 and reported["slot.max.retained.wal.bytes"] == 1 << 30


def test_two_connectors_with_their_own_slots_on_one_database(connect: ConnectProcess, postgres,
                                                             database: str) -> None:
    with psycopg.connect(postgres.dsn(database), autocommit=True) as db:
        db.execute("CREATE TABLE shared (id int PRIMARY KEY, v text)")
        db.execute("INSERT INTO shared VALUES (1, 'snap')")
        names, prefixes = [unique("pg-two"), unique("pg-two")], [unique("pg2a"), unique("pg2b")]
        for name, prefix in zip(names, prefixes, strict=True):
            connect.create(name, source(postgres, database, prefix, **{"slot.name": f"slot_{uuid.uuid4().hex[:8]}",
                                                                       "publication.name": f"pub_{prefix[-8:]}"}))
        for name in names:
            connect.wait_state(name, "RUNNING", tasks=1)
        db.execute("INSERT INTO shared VALUES (2, 'stream')")
        seen = []
        for prefix in prefixes:
            with TopicReader(connect.bootstrap, f"{prefix}.public.shared") as reader:
                seen.append([(v["op"], v["after"]["id"]) for _, v in events(reader, 2)])
        slots = db.execute("SELECT count(*) FROM pg_replication_slots WHERE database = %s", (database,)).fetchone()
    assert seen == [[("r", 1), ("c", 2)], [("r", 1), ("c", 2)]] and slots == (2,)
    for name in names:
        connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_a_restart_mid_snapshot_snapshots_again_and_loses_nothing(postgres, database: str, tmp_path) -> None:
    prefix = unique("pgs")
    with psycopg.connect(postgres.dsn(database), autocommit=True) as db, ConnectProcess(tmp_path / "up") as proc:
        db.execute("CREATE TABLE big (id int PRIMARY KEY, v text)")
        db.execute("INSERT INTO big SELECT g, repeat('x', 100) FROM generate_series(1, 200000) g")
        db.execute("ANALYZE big")  # the estimate comes from pg_class.reltuples, as Debezium's does
        name = unique("pg-snap")
        proc.create(name, source(postgres, database, prefix, **{"snapshot.fetch.size": "500",
                                                                 "max.batch.size": "500"}))
        topic = f"{prefix}.public.big"
        from support.connectproc import end_offset

        at_kill = wait_for(lambda: (n := end_offset(proc.bootstrap, topic)) > 1000 and n, 60, 0.05,
                           "the snapshot under way")
        during = proc.ok("GET", f"/connectors/{name}/tasks/0/metrics")
        proc.restart(kill=True)
        proc.wait_state(name, "RUNNING", tasks=1, timeout=60)

        def snapshot_open() -> bool:  # the restarted task's snapshot point is fixed: a later insert streams
            got = proc.call("GET", f"/connectors/{name}/tasks/0/metrics")
            return got.status == 200 and "snapshot" in got.json["metrics"]

        wait_for(snapshot_open, 60, 0.05, "the restarted task's snapshot")
        db.execute("INSERT INTO big VALUES (200001, 'after the restart')")
        with TopicReader(proc.bootstrap, topic) as reader:
            # Until the streamed row: records written between at_kill and the kill replay too, so a count
            # taken from at_kill can be reached before it arrives.
            def streamed_row_read() -> bool:
                reader.poll()
                last = reader.messages[-1].value if reader.messages else None
                return last is not None and json.loads(last)["after"]["id"] == 200001

            wait_for(streamed_row_read, 120, 0.0, "the row inserted after the restart")
            msgs = reader.messages
        ids = [json.loads(m.value)["after"]["id"] for m in msgs if m.value]
        after = proc.ok("GET", f"/connectors/{name}/tasks/0/metrics")
        exported = scrape_metrics(proc.rest)[1]

    def debezium(metric: str, context: str, table: str | None = None) -> float:
        """A sample as Debezium's JMX-exporter rules name it (labels in sorted order, as scraped)."""
        table_label = f',table="{table}"' if table else ""
        return exported[f'debezium_metrics_{metric}{{connector="{name}",context="{context}",name="{prefix}",'
                        f'plugin="postgres"{table_label},task="0"}}']

    assert debezium("RowsScanned", "snapshot", "public.big") == 200000
    assert debezium("SnapshotCompleted", "snapshot") == 1 and debezium("RemainingTableCount", "snapshot") == 0
    assert debezium("TotalNumberOfEventsSeen", "streaming") == 1
    assert 0 <= debezium("MilliSecondsBehindSource", "streaming") < 120_000
    snap = during["metrics"]["snapshot"]
    assert during["metrics"]["phase"] == "snapshot" and snap["running"] and not snap["completed"], during
    assert snap["tables.total"] == 1 and snap["tables.done"] == 0 and snap["table"] == "public.big", snap
    assert 0 < snap["rows.scanned"] < 200000 and 180000 <= snap["rows.estimated"] <= 220000, snap
    done = after["metrics"]["snapshot"]
    assert after["metrics"]["phase"] == "streaming" and done["completed"] and not done["running"], after
    assert done["tables.done"] == 1 and done["rows.scanned"] == 200000 and after["metrics"]["streaming"]["events"] == 1
    assert set(ids) == set(range(1, 200002)), len(set(ids))
    assert at_kill < 200000, "the kill came after the snapshot ended"
    print(f"\nrestart mid-snapshot: killed after {at_kill:,} of 200,000 rows; {len(ids) - 200001:,} events replayed")


def test_transaction_metadata_begin_end_and_event_blocks(connect: ConnectProcess, postgres, database: str) -> None:
    prefix = unique("pgx")
    with psycopg.connect(postgres.dsn(database), autocommit=True) as db:
        db.execute("CREATE TABLE t1 (id int PRIMARY KEY)")
        db.execute("CREATE TABLE t2 (id int PRIMARY KEY)")
        name = unique("pg-tx")
        connect.create(name, source(postgres, database, prefix, **{"provide.transaction.metadata": "true",
                                                                   "snapshot.mode": "no_data"}))
        connect.wait_state(name, "RUNNING", tasks=1)
        import time

        time.sleep(1)
        with db.transaction():
            db.execute("INSERT INTO t1 VALUES (1), (2)")
            db.execute("INSERT INTO t2 VALUES (1)")
        with TopicReader(connect.bootstrap, f"{prefix}.transaction") as reader:
            meta = events(reader, 2)
        with TopicReader(connect.bootstrap, f"{prefix}.public.t1") as reader:
            t1 = events(reader, 2)
        connect.ok("DELETE", f"/connectors/{name}", expect=204)
    (begin_key, begin), (end_key, end) = meta
    tx_id = begin["id"]
    assert begin_key == end_key == {"id": tx_id} and ":" in tx_id
    assert begin["status"] == "BEGIN" and begin["event_count"] is None
    assert end["status"] == "END" and end["event_count"] == 3
    assert sorted((c["data_collection"], c["event_count"]) for c in end["data_collections"]) == [
        ("public.t1", 2), ("public.t2", 1)]
    assert [v["transaction"] for _, v in t1] == [
        {"id": tx_id, "total_order": 1, "data_collection_order": 1},
        {"id": tx_id, "total_order": 2, "data_collection_order": 2}]


def test_transaction_metadata_resumes_mid_transaction_from_its_offset(connect: ConnectProcess, postgres,
                                                                      database: str) -> None:
    """A task resumed from an offset inside a transaction (its first events, and so its BEGIN, sent and stored
    before a crash) sends the rest of it and the END once: no second BEGIN, the END counting every event, the
    transaction blocks counting on (the offset keeps Debezium's transaction_* keys). The offset is written with
    PATCH /connectors/{name}/offsets from the transaction's LSNs (pgoutput read from the slot without
    consuming it), as a worker killed between two polls of the transaction leaves it."""
    from headwater.connectors.postgres.pgoutput import Begin, Commit, Insert, decode

    prefix, slot, publication = unique("pgxr"), f"slot_{uuid.uuid4().hex[:8]}", f"pub_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(postgres.dsn(database), autocommit=True) as db:
        db.execute("CREATE TABLE t1 (id int PRIMARY KEY)")
        db.execute("CREATE TABLE t2 (id int PRIMARY KEY)")
        name = unique("pg-txr")
        connect.create(name, source(postgres, database, prefix, **{
            "provide.transaction.metadata": "true", "snapshot.mode": "no_data", "slot.name": slot,
            "publication.name": publication}))
        connect.wait_state(name, "RUNNING", tasks=1)
        assert connect.call("PUT", f"/connectors/{name}/stop").status == 204
        connect.wait_state(name, "STOPPED", tasks=0)
        with db.transaction():
            db.execute("INSERT INTO t1 VALUES (1), (2)")
            db.execute("INSERT INTO t2 VALUES (1)")
        messages = [(int(lsn), decode(bytes(data))) for lsn, data in db.execute(
            "SELECT lsn - '0/0', data FROM pg_logical_slot_peek_binary_changes(%s, NULL, NULL, 'proto_version', "
            "'1', 'publication_names', %s)", (slot, publication)).fetchall()]
        (begin,) = [m for _, m in messages if isinstance(m, Begin)]
        (commit,) = [m for _, m in messages if isinstance(m, Commit)]
        inserts = [lsn for lsn, m in messages if isinstance(m, Insert)]
        assert len(inserts) == 3, messages
        tx_id = f"{begin.xid}:{begin.final_lsn}"
        sent = {"lsn_proc": inserts[1], "lsn_commit": begin.final_lsn, "lsn": inserts[1], "txId": begin.xid,
                "ts_usec": begin.commit_ts_us, "transaction_id": tx_id,
                "transaction_data_collection_order_public.t1": 2}  # BEGIN and t1's two rows were sent
        connect.ok("PATCH", f"/connectors/{name}/offsets",
                   {"offsets": [{"partition": {"server": prefix}, "offset": sent}]}, expect=200)
        assert connect.call("PUT", f"/connectors/{name}/resume").status == 202
        connect.wait_state(name, "RUNNING", tasks=1)
        with TopicReader(connect.bootstrap, f"{prefix}.public.t2") as reader:
            (t2,) = events(reader, 1)
        with TopicReader(connect.bootstrap, f"{prefix}.transaction") as reader:
            # (settle: a second BEGIN or END would be here by then)
            meta = [(json.loads(m.key or b"null"), json.loads(m.value or b"null")) for m in reader.read(1, settle=2)]
        with TopicReader(connect.bootstrap, f"{prefix}.public.t1") as reader:
            resent_t1 = len(reader.read(timeout=2))
        stored = wait_for(lambda: next((o["offset"] for o in connect.ok("GET", f"/connectors/{name}/offsets",
                                                                         expect=200)["offsets"]
                                        if o["offset"].get("lsn_proc") == commit.end_lsn), None),
                          20, 0.2, "the END's offset stored", connect.log_text)
        connect.ok("DELETE", f"/connectors/{name}", expect=204)
    assert resent_t1 == 0
    assert [v["status"] for _, v in meta] == ["END"], meta
    end = meta[0][1]
    assert end["id"] == tx_id and end["event_count"] == 3
    assert sorted((c["data_collection"], c["event_count"]) for c in end["data_collections"]) == [
        ("public.t1", 2), ("public.t2", 1)]
    assert t2[1]["after"] == {"id": 1}
    assert t2[1]["transaction"] == {"id": tx_id, "total_order": 3, "data_collection_order": 1}
    assert stored["transaction_id"] == tx_id and stored["transaction_data_collection_order_public.t2"] == 1


def test_slot_drop_on_stop_drops_the_slot_and_the_default_keeps_it(connect: ConnectProcess, postgres,
                                                                   database: str) -> None:
    def slots() -> set[str]:
        with psycopg.connect(postgres.dsn(database), autocommit=True) as db:
            return {r[0] for r in db.execute("SELECT slot_name FROM pg_replication_slots WHERE database = %s",
                                             (database,)).fetchall()}

    kept, dropped = f"slot_{uuid.uuid4().hex[:8]}", f"slot_{uuid.uuid4().hex[:8]}"
    names = []
    for slot, drop in ((kept, "false"), (dropped, "true")):
        name = unique("pg-drop")
        names.append(name)
        connect.create(name, source(postgres, database, unique("pgd"), **{"slot.name": slot,
                                                                          "slot.drop.on.stop": drop}))
        connect.wait_state(name, "RUNNING", tasks=1)
    wait_for(lambda: {kept, dropped} <= slots(), 20, 0.1, "both slots")
    for name in names:
        connect.ok("DELETE", f"/connectors/{name}", expect=204)
    wait_for(lambda: dropped not in slots(), 20, 0.1, "the slot.drop.on.stop slot to be dropped", connect.log_text)
    assert kept in slots()  # Debezium's default: the slot outlives the connector (changes are not lost)


def _pairs() -> list[tuple[str, str]]:
    """TYPES_DDL's columns (but the key) as (name, type)."""
    body = TYPES_DDL.split("typed (", 1)[1].rsplit(")", 1)[0]
    names = [part.strip().split(" ", 1) for part in body.replace("\n", " ").split(", ")
             if part.strip() and not part.strip().startswith("id ")]
    return [(name, type_) for name, type_ in names]


def test_every_type_not_null_and_nullable_in_deletes_key_changes_and_updates(connect: ConnectProcess, postgres,
                                                                            database: str) -> None:
    """Every mapped type as a NOT NULL column and as a nullable one, under REPLICA IDENTITY DEFAULT and FULL:
    an update, a key change and a delete stream as Debezium's events, the task keeps RUNNING, and the
    left-out NOT NULL columns of a key-only old tuple take Debezium's fallback (the issue: a numeric NOT NULL
    column's stand-in failed the task, and every restart failed again on the same WAL record)."""
    prefix = unique("pgnn")
    pairs = _pairs()
    values = TYPES_ROW.split(", ", 1)[1]  # every column's value, without the key's placeholder
    with psycopg.connect(postgres.dsn(database), autocommit=True) as db:
        db.execute("CREATE TYPE mood AS ENUM ('sad', 'happy')")
        columns = ", ".join([f"{n} {t}" for n, t in pairs] + [f"{n}_nn {t} NOT NULL" for n, t in pairs])
        for table in ("dflt", "whole"):
            db.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, {columns})")
            db.execute(f"INSERT INTO {table} VALUES (1, {values}, {values}), (2, {values}, {values})")
        db.execute("ALTER TABLE whole REPLICA IDENTITY FULL")
        name = unique("pg-nn")
        connect.create(name, source(postgres, database, prefix, **{"value.converter.schemas.enable": "true"}))
        got: dict[str, list[tuple[Any, Any]]] = {}
        for table in ("dflt", "whole"):
            with TopicReader(connect.bootstrap, f"{prefix}.public.{table}") as reader:
                events(reader, 2)
                with db.transaction():
                    db.execute(f"UPDATE {table} SET t = 'changed', t_nn = 'changed' WHERE id = 1")
                    db.execute(f"UPDATE {table} SET id = 3 WHERE id = 1")
                    db.execute(f"DELETE FROM {table} WHERE id = 2")
                got[table] = events(reader, 2 + 1 + 3 + 2)[2:]
        state = connect.status(name)["tasks"][0]["state"]
        connect.ok("DELETE", f"/connectors/{name}", expect=204)
    assert state == "RUNNING"
    for table, stream in got.items():
        ops = [(v or {}).get("payload", {}).get("op") for _, v in stream]
        assert ops == ["u", "d", None, "c", "d", None], (table, ops)
        keys = [k for k, _ in stream]
        assert keys == [{"id": 1}, {"id": 1}, {"id": 1}, {"id": 3}, {"id": 2}, {"id": 2}], (table, keys)
        update, rekey, created, delete = (stream[i][1]["payload"] for i in (0, 1, 3, 4))
        assert update["after"]["t_nn"] == "changed" and created["after"]["t_nn"] == "changed"
        for column, (value, _type, _logical) in EXPECTED.items():
            assert created["after"][f"{column}_nn"] == (value if column != "t" else "changed"), (table, column)
            for gone in (rekey["before"], delete["before"]):
                if table == "whole":  # REPLICA IDENTITY FULL: the whole old row
                    assert gone[f"{column}_nn"] == value or column == "t", (table, column, gone)
                    assert gone[column] == value or column == "t", (table, column, gone)
                else:  # the old key only: null, or Debezium's fallback for a NOT NULL column
                    assert gone[column] is None, (table, column, gone)
                    assert gone[f"{column}_nn"] == FALLBACK.get(column, ""), (table, column, gone)
        if table == "dflt":
            assert update["before"] is None
        else:
            assert update["before"]["t_nn"] == EXPECTED["t"][0] and update["before"]["id"] == 1


FALLBACK: dict[str, Any] = {  # Debezium's value of a NOT NULL column a key-only old tuple leaves out ("" if absent)
    "i2": 0, "i8": 0, "f4": 0.0, "f8": 0.0, "num": _b64(b"\x00"), "numu": {"scale": 0, "value": _b64(b"\x00")},
    "b": False, "d": 0, "tm": 0, "tm3": 0, "ts": 0, "ts3": 0, "tz": "1970-01-01T00:00:00Z", "tmz": "00:00:00Z",
    "iv": 0, "ai": [], "at": [],
}


def test_snapshot_records_carry_debeziums_source_block(connect: ConnectProcess, postgres, database: str) -> None:
    """``r`` records' source as Debezium's: txId (the snapshot transaction's id), lsn (the slot's consistent
    point), sequence [null,"<lsn>"], ts_ms the snapshot's time in the database, and the markers first,
    first_in_data_collection, true, last_in_data_collection, last."""
    prefix = unique("pgsrc")
    with psycopg.connect(postgres.dsn(database), autocommit=True) as db:
        for table in ("a", "b"):
            db.execute(f"CREATE TABLE {table} (id int PRIMARY KEY)")
            db.execute(f"INSERT INTO {table} VALUES (1), (2), (3)")
        before = fetch_one(db, "SELECT (extract(epoch FROM now()) * 1000)::bigint, txid_current()")
        name = unique("pg-src")
        connect.create(name, source(postgres, database, prefix))
        snap = []
        for table in ("a", "b"):
            with TopicReader(connect.bootstrap, f"{prefix}.public.{table}") as reader:
                snap += [v["source"] for _, v in events(reader, 3)]
        with TopicReader(connect.bootstrap, f"{prefix}.public.a") as reader:
            db.execute("INSERT INTO a VALUES (4)")
            streamed = events(reader, 4)[3][1]["source"]
        connect.ok("DELETE", f"/connectors/{name}", expect=204)
    assert [s["snapshot"] for s in snap] == ["first", "true", "last_in_data_collection",
                                             "first_in_data_collection", "true", "last"]
    lsn, tx = snap[0]["lsn"], snap[0]["txId"]
    assert isinstance(lsn, int) and isinstance(tx, int) and tx > before[1], snap[0]
    assert tx < streamed["txId"] and lsn <= streamed["lsn"]
    assert all((s["lsn"], s["txId"], s["sequence"], s["ts_ms"]) == (lsn, tx, f'[null,"{lsn}"]', snap[0]["ts_ms"])
               for s in snap), snap
    assert before[0] <= snap[0]["ts_ms"] <= streamed["ts_ms"] and snap[0]["ts_us"] // 1000 == snap[0]["ts_ms"]
    assert all((s["version"], s["connector"], s["name"], s["db"], s["schema"], s["xmin"]) ==
               (snap[0]["version"], "postgresql", prefix, database, "public", None) for s in snap)
