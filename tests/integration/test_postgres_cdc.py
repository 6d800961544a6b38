"""Postgres CDC through ``headwater up``: a real PostgreSQL (tests/pgserver.py), the real broker and
worker; Debezium's topics, keys and envelopes; snapshot, then streaming with no gap and no overlap."""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg
import pytest
from connectproc import ConnectProcess, TopicReader, module_connect, unique, wait_for

pytestmark = pytest.mark.timeout(180)

connect = module_connect("postgres-cdc")
JSON_PLAIN = {"key.converter": "org.apache.kafka.connect.json.JsonConverter", "key.converter.schemas.enable": "false",
              "value.converter": "org.apache.kafka.connect.json.JsonConverter",
              "value.converter.schemas.enable": "false"}


@pytest.fixture
def database(postgres) -> str:
    name = "cdc_" + uuid.uuid4().hex[:8]
    with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return name


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
            row = db.execute("SELECT confirmed_flush_lsn - '0/0' FROM pg_replication_slots WHERE slot_name = %s",
                             (slot,)).fetchone()
            return int(row[0])

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
