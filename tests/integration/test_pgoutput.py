"""The pgoutput decoder against a real PostgreSQL: a slot's changes, read with
``pg_logical_slot_peek_binary_changes``, decode into the messages the statements made."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from support.pgserver import fetch_one

from headwater.connectors.postgres.pgoutput import (
    UNCHANGED_TOAST,
    Begin,
    Commit,
    DecodeError,
    Delete,
    Insert,
    Relation,
    Truncate,
    TypeInfo,
    Update,
    decode,
    lsn_text,
    parse_lsn,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def database(postgres) -> str:
    name = "pgoutput_" + uuid.uuid4().hex[:8]
    with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return postgres.dsn(name)


def changes(conn: psycopg.Connection, slot: str) -> list:
    rows = conn.execute("SELECT data FROM pg_logical_slot_peek_binary_changes(%s, NULL, NULL, 'proto_version', "
                        "'1', 'publication_names', 'pub')", (slot,)).fetchall()
    return [decode(bytes(r[0])) for r in rows]


def test_a_transaction_of_every_kind_of_change_decodes(database: str) -> None:
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE TYPE mood AS ENUM ('sad', 'happy')")
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, name text, big text, feeling mood, price numeric(8,2))")
        conn.execute("ALTER TABLE items ALTER COLUMN big SET STORAGE EXTERNAL")
        conn.execute("CREATE PUBLICATION pub FOR TABLE items")
        conn.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
        with conn.transaction():
            conn.execute("INSERT INTO items VALUES (1, 'one', repeat('x', 5000), 'happy', 1.50), "
                         "(2, NULL, NULL, NULL, NULL)")
            conn.execute("UPDATE items SET name = 'uno' WHERE id = 1")  # big (TOASTed) unchanged
            conn.execute("UPDATE items SET id = 3 WHERE id = 2")  # a key change carries the old key
            conn.execute("DELETE FROM items WHERE id = 3")
        conn.execute("TRUNCATE items")
        msgs = changes(conn, "s")
        current = fetch_one(conn, "SELECT pg_current_wal_lsn()::text")[0]

    kinds = [type(m).__name__ for m in msgs]
    # the enum's Type message comes before the Relation that uses it, in each transaction
    assert kinds == ["Begin", "TypeInfo", "Relation", "Insert", "Insert", "Update", "Update", "Delete", "Commit",
                     "Begin", "TypeInfo", "Relation", "Truncate", "Commit"], kinds
    begin, commit = msgs[0], msgs[8]
    assert isinstance(begin, Begin) and isinstance(commit, Commit)
    assert begin.final_lsn == commit.commit_lsn and commit.end_lsn > commit.commit_lsn
    assert commit.end_lsn <= parse_lsn(current)
    assert begin.commit_ts_us == commit.commit_ts_us > 1_700_000_000_000_000

    rel = next(m for m in msgs if isinstance(m, Relation))
    assert (rel.namespace, rel.name, rel.replica_identity) == ("public", "items", "d")
    assert [(c.name, c.key) for c in rel.columns] == [("id", True), ("name", False), ("big", False),
                                                     ("feeling", False), ("price", False)]
    assert rel.columns[0].type_oid == 23 and rel.columns[4].type_modifier == ((8 << 16) | 2) + 4
    enum = next(m for m in msgs if isinstance(m, TypeInfo))
    assert (enum.namespace, enum.name) == ("public", "mood") and enum.oid == rel.columns[3].type_oid

    first, second = msgs[3], msgs[4]
    assert isinstance(first, Insert) and first.relation_oid == rel.oid
    assert first.new == ("1", "one", "x" * 5000, "happy", "1.50")
    assert isinstance(second, Insert) and second.new == ("2", None, None, None, None)
    toast, rekey = msgs[5], msgs[6]
    assert isinstance(toast, Update) and toast.old is None
    assert toast.new == ("1", "uno", UNCHANGED_TOAST, "happy", "1.50")
    assert isinstance(rekey, Update) and rekey.old_is_key and rekey.old == ("2", None, None, None, None)
    assert rekey.new[0] == "3"
    delete = msgs[7]
    assert isinstance(delete, Delete) and delete.old_is_key and delete.old[0] == "3"
    truncate = msgs[12]
    assert isinstance(truncate, Truncate) and truncate.relation_oids == (rel.oid,)
    assert not truncate.cascade and not truncate.restart_identity


def test_replica_identity_full_sends_the_whole_old_row(database: str) -> None:
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
        conn.execute("ALTER TABLE t REPLICA IDENTITY FULL")
        conn.execute("CREATE PUBLICATION pub FOR TABLE t")
        conn.execute("SELECT pg_create_logical_replication_slot('full_slot', 'pgoutput')")
        conn.execute("INSERT INTO t VALUES (1, 'a')")
        conn.execute("UPDATE t SET v = 'b'")
        conn.execute("DELETE FROM t")
        msgs = changes(conn, "full_slot")
    update, delete = [m for m in msgs if isinstance(m, (Update, Delete))]
    assert isinstance(update, Update) and isinstance(delete, Delete)
    assert update.old == ("1", "a") and not update.old_is_key and update.new == ("1", "b")
    assert delete.old == ("1", "b") and not delete.old_is_key


def test_lsn_text_round_trips_and_bad_messages_say_what_is_wrong() -> None:
    for text in ("0/0", "0/16B3748", "1A/FFFFFFFF"):
        assert lsn_text(parse_lsn(text)) == text
    with pytest.raises(DecodeError, match="unknown message type 'Z'"):
        decode(b"Z")
    with pytest.raises(DecodeError, match="truncated 'B'"):
        decode(b"B\x00\x01")
    with pytest.raises(DecodeError, match="empty"):
        decode(b"")
