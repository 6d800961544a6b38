"""The Postgres sink task in this process: a batch in wire form (``put_encoded``), whose inserts, reads and
updates take a lane of their own and whose other records (deletes, tombstones, truncates, unchanged TOAST
values, plain rows) take the record path's steps, writes what ``put`` writes of the same records, in every
primary.key.mode, with and without schemas; a value that does not convert hands the batch back unwritten."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from support.taskcontexts import FixedSinkContext

from headwater.connect.api import EncodedSinkBatch, SinkRecord, TopicPartition
from headwater.connect.converters.json.converter import JsonConverter
from headwater.connectors.envelope import UNAVAILABLE
from headwater.connectors.postgres.sink import PostgresSinkTask

pytestmark = pytest.mark.timeout(120)

TOPIC = "lanes.public.items"


class _Message:
    """A consumed record as the worker hands it to ``put_encoded``."""

    def __init__(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        self.offset, self.timestamp, self.key, self.value, self.headers = offset, 0, key, value, None


ROW_SCHEMA = {"type": "struct", "optional": True, "name": "items.Value", "fields": [
    {"field": "id", "type": "int32", "optional": False}, {"field": "n", "type": "int32", "optional": True},
    {"field": "body", "type": "string", "optional": True}]}
ENVELOPE_SCHEMA = {"type": "struct", "optional": False, "name": "lanes.public.items.Envelope", "fields": [
    {**ROW_SCHEMA, "field": "before"}, {**ROW_SCHEMA, "field": "after"},
    {"field": "source", "type": "struct", "optional": False, "fields": [
        {"field": "db", "type": "string", "optional": False}, {"field": "schema", "type": "string", "optional": False},
        {"field": "table", "type": "string", "optional": False}]},
    {"field": "op", "type": "string", "optional": False}]}
KEY_SCHEMA = {"type": "struct", "optional": False, "name": "items.Key", "fields": [
    {"field": "id", "type": "int32", "optional": False}]}


def _changes() -> list[tuple[dict[str, Any] | None, dict[str, Any] | None]]:
    """(key, value) pairs: Debezium envelopes of every kind, a tombstone and a plain row among them."""
    source = {"db": "a", "schema": "public", "table": "items"}

    def event(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any]:
        return {"before": before, "after": after, "source": source, "op": op}

    out: list[tuple[dict[str, Any] | None, dict[str, Any] | None]] = []
    for i in range(40):
        out.append(({"id": i}, event("c" if i % 3 else "r", None, {"id": i, "n": i, "body": f"body {i}"})))
    for i in range(0, 40, 4):
        out.append(({"id": i}, event("u", None, {"id": i, "n": -i, "body": UNAVAILABLE})))  # body left alone
    for i in range(1, 40, 5):
        out.append(({"id": i}, event("u", None, {"id": i, "n": i * 10, "body": f"new {i}"})))
    out.append(({"id": 7}, event("d", {"id": 7, "n": None, "body": None}, None)))
    out.append(({"id": 7}, None))  # its tombstone
    out.append(({"id": 8}, None))  # a tombstone alone
    out.append(({"id": 9}, {"id": 9, "n": 99, "body": "a plain row"}))  # not an envelope
    out.append(({"id": 11}, event("u", None, {"id": 11, "n": 0, "body": None})))
    return out


def _task(postgres: Any, database: str, **extra: str) -> PostgresSinkTask:
    task = PostgresSinkTask()
    task.initialize(FixedSinkContext(TopicPartition(TOPIC, 0)))
    task.start({"connector.class": "JdbcSinkConnector", "name": "lanes", "topics": TOPIC,
                "connection.url": f"jdbc:postgresql://{postgres.host}:{postgres.port}/{database}",
                "connection.username": postgres.user, "connection.password": postgres.password or "",
                "table.name.format": "${source.schema}.${source.table}", **extra})
    task.open([TopicPartition(TOPIC, 0)])
    return task


def _converters(schemas: bool) -> tuple[JsonConverter, JsonConverter]:
    key, value = JsonConverter(), JsonConverter()
    key.configure({"schemas.enable": str(schemas).lower()}, True)
    value.configure({"schemas.enable": str(schemas).lower()}, False)
    return key, value


def _wire(data: dict[str, Any] | None, schemas: bool, key: bool = False) -> bytes | None:
    if data is None:
        return None
    schema = KEY_SCHEMA if key else ENVELOPE_SCHEMA if "op" in data else {**ROW_SCHEMA, "optional": False}
    return json.dumps({"schema": schema, "payload": data} if schemas else data).encode()


def _table(postgres: Any, database: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    with psycopg.connect(postgres.dsn(database)) as db:
        rows = db.execute("SELECT id::int, n::int, body FROM public.items ORDER BY id::int").fetchall()
        offsets = db.execute("SELECT topic, partition, next_offset FROM __headwater_sink_offsets").fetchall()
    return rows, offsets


@pytest.mark.parametrize(("mode", "schemas"), [("record_value", False), ("record_key", False), ("none", False),
                                               ("record_key", True)])
def test_a_batch_in_wire_form_writes_what_put_writes(postgres: Any, mode: str, schemas: bool) -> None:
    changes = _changes()
    if mode == "none":  # no key: nothing to delete or upsert by, so only the rows that append
        changes = [(k, v) for k, v in changes if v is not None and v.get("op") in (None, "c", "r")]
    settings = {"primary.key.mode": mode, **({"primary.key.fields": "id"} if mode == "record_value" else {})}
    wire, record = postgres.new_database("lanes_wire"), postgres.new_database("lanes_record")
    for database in (wire, record):  # (made from schemaless JSON, every column would be text)
        with psycopg.connect(postgres.dsn(database), autocommit=True) as db:
            db.execute(f"CREATE TABLE items (id int{'' if mode == 'none' else ' PRIMARY KEY'}, n int, body text)")
    key_converter, value_converter = _converters(schemas)
    messages = [_Message(offset, _wire(k, schemas, key=True), _wire(v, schemas))
                for offset, (k, v) in enumerate(changes)]
    task = _task(postgres, wire, **settings)
    try:
        assert task.decode_with(key_converter, value_converter)
        for start in range(0, len(messages), 25):  # puts of 25: a key's changes in one put and across puts
            assert task.put_encoded(EncodedSinkBatch(TOPIC, 0, messages[start:start + 25]))
    finally:
        task.stop()
    task = _task(postgres, record, **settings)
    try:
        for start in range(0, len(messages), 25):
            records = []
            for m in messages[start:start + 25]:
                key = key_converter.to_connect_data(TOPIC, m.key)
                value = value_converter.to_connect_data(TOPIC, m.value)
                records.append(SinkRecord(TOPIC, value.value, key.value, 0, key.schema, value.schema, 0, [], m.offset))
            task.put(records)
    finally:
        task.stop()
    got, want = _table(postgres, wire), _table(postgres, record)
    assert got == want
    assert want[1] == [(TOPIC, 0, len(messages))]
    if mode != "none":  # deleted, kept from the table, updated, written as a plain row
        ids = {r[0]: r for r in want[0]}
        assert 7 not in ids and ids[4] == (4, -4, "body 4") and ids[6] == (6, 60, "new 6") and ids[9][1] == 99
    else:
        assert len(want[0]) == len(changes)


def test_a_value_that_does_not_convert_hands_the_batch_back_unwritten(postgres: Any) -> None:
    database = postgres.new_database("lanes_bad")
    key_converter, value_converter = _converters(False)
    good = [_Message(o, _wire({"id": o}, False, key=True), _wire(v, False))
            for o, (_, v) in enumerate(_changes()[:10])]
    task = _task(postgres, database, **{"primary.key.mode": "record_key"})
    try:
        assert task.decode_with(key_converter, value_converter)
        assert task.put_encoded(EncodedSinkBatch(TOPIC, 0, good[:5]))
        assert task.put_encoded(EncodedSinkBatch(TOPIC, 0, [*good[5:9], _Message(9, b'{"id":9}', b"{not json")])) \
            is False
    finally:
        task.stop()
    rows, offsets = _table(postgres, database)
    assert [r[0] for r in rows] == [0, 1, 2, 3, 4] and offsets == [(TOPIC, 0, 5)]


# Schemaless envelopes as other writers could write them (the sink reads the usual ones without building their
# source block; these must come out as the converter reads them): escapes, unicode, keys in any order,
# whitespace, duplicate keys (the last wins), numbers at the edges in fields the lane skips, an op that is not
# a string (the record path's steps: its row is written, as put writes it).
TRICKY = [
    '{"before":null,"after":{"id":1,"n":1,"body":"caf\\u00e9 \\ud83d\\ude00 \\"q\\" \\\\ \\/ \\t ünï 漢字"},'
    '"source":{"version":"x\\"y","db":"a","schema":"p\\u0075blic","table":"it\\u0065ms"},"op":"c"}',
    '{"after":{"id":2,"n":2,"body":"ß"},"source":{"note":"ß\\u2028","schema":"public","table":"items"},'
    '"op":"r","before":null,"ts_ms":123456789012345678901234567890,"ts_us":1e999}',
    '{"op":"d","before":{"id":3},"after":null,"source":{"schema":"public","table":"elsewhere"},"op":"c",'
    '"after":{"id":3,"n":3,"body":"the last after"},"source":{"schema":"public","table":"items"}}',
    ' { "op" : "u" , "before" : {"id":1,"n":1,"body":"old"} , "source" : { "schema" : "public" , '
    '"table" : "items" } , "after" : { "id" : 1 , "n" : 10 , "body" : "updated" } } ',
    '{"op":"u","after":{"id":4,"n":4,"body":null,"n":40},"source":{"schema":"public","table":"items"}}',
    '{"op":{"c":1},"after":{"id":5,"n":5,"body":"odd op"},"source":{"schema":"public","table":"items"}}',
]


@pytest.mark.parametrize("mode", ["record_value", "record_key"])
def test_tricky_schemaless_envelopes_write_what_put_writes(postgres: Any, mode: str) -> None:
    settings = {"primary.key.mode": mode, **({"primary.key.fields": "id"} if mode == "record_value" else {})}
    values = [v.encode() for v in TRICKY]
    messages = [_Message(o, json.dumps({"id": json.loads(v)["after"]["id"]}).encode(), v)
                for o, v in enumerate(values)]
    tables = []
    for lane in ("wire", "record"):
        database = postgres.new_database(f"lanes_tricky_{lane}")
        with psycopg.connect(postgres.dsn(database), autocommit=True) as db:
            db.execute("CREATE TABLE items (id int PRIMARY KEY, n int, body text)")
        key_converter, value_converter = _converters(False)
        task = _task(postgres, database, **settings)
        try:
            if lane == "wire":
                assert task.decode_with(key_converter, value_converter)
                assert task.put_encoded(EncodedSinkBatch(TOPIC, 0, messages[:3]))
                assert task.put_encoded(EncodedSinkBatch(TOPIC, 0, messages[3:]))
            else:
                for part in (messages[:3], messages[3:]):
                    records = []
                    for m in part:
                        key = key_converter.to_connect_data(TOPIC, m.key)
                        records.append(SinkRecord(TOPIC, value_converter.to_connect_data(TOPIC, m.value).value,
                                                  key.value, 0, key.schema, None, 0, [], m.offset))
                    task.put(records)
        finally:
            task.stop()
        tables.append(_table(postgres, database))
    assert tables[0] == tables[1]
    assert tables[1][0] == [(1, 10, "updated"), (2, 2, "ß"), (3, 3, "the last after"), (4, 40, None),
                            (5, 5, "odd op")]


@pytest.mark.parametrize("value", [
    b'{"op":"c","after":{"id":9,"n":9,"body":"x"},"source":{"v":"\xff","db":"a","schema":"public","table":"items"}}',
    b'{"op":"c","after":{"id":9,"n":9,"body":"x"},"source":{"v":' + b"1" * 4301 + b',"db":"a","schema":"public",'
    b'"table":"items"}}',
])
def test_an_envelope_the_converter_refuses_in_a_skipped_field_hands_the_batch_back(postgres: Any,
                                                                                  value: bytes) -> None:
    """Not UTF-8, or an integer longer than Python reads, in the source block (of the table the batch already
    named: no conversion for its name): the lane does not build that block, yet the batch goes back to the
    worker's path unwritten, as when the converter read it all."""
    database = postgres.new_database("lanes_refused")
    key_converter, value_converter = _converters(False)
    good = [_Message(o, _wire({"id": o}, False, key=True), _wire(v, False))
            for o, (_, v) in enumerate(_changes()[:3])]
    task = _task(postgres, database, **{"primary.key.mode": "record_value", "primary.key.fields": "id"})
    try:
        assert task.decode_with(key_converter, value_converter)
        assert task.put_encoded(EncodedSinkBatch(TOPIC, 0, good[:2]))
        assert task.put_encoded(EncodedSinkBatch(TOPIC, 0, [good[2], _Message(3, b'{"id":9}', value)])) is False
        with pytest.raises(Exception, match="Converting byte"):
            value_converter.to_connect_data(TOPIC, value)  # what the worker's path then reports
    finally:
        task.stop()
    rows, offsets = _table(postgres, database)
    assert [r[0] for r in rows] == [0, 1] and offsets == [(TOPIC, 0, 2)]
