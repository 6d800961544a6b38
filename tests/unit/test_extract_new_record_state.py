"""ExtractNewRecordState on Debezium change events built by the Postgres source's own event code."""

from __future__ import annotations

from headwater.connect.api import SourceRecord
from headwater.connectors.postgres.events import ChangeSource, TableColumn, TableSchema
from headwater.connectors.postgres.transforms import ExtractNewRecordState
from headwater.connectors.postgres.types import column_type

TABLE = TableSchema("db1", "inventory", "public", "items", [
    TableColumn("id", column_type(23, -1), True, True, 0), TableColumn("name", column_type(25, -1), False, False, 1)])
SRC = ChangeSource(1_700_000_000_000_000, "false", 42, 1234, 1200)


def event(op: str, before: tuple | None, after: tuple | None) -> SourceRecord:
    return TABLE.event(op, TABLE.row(before) if before else None, TABLE.row(after) if after else None, SRC,
                       {"server": "db1"}, {"lsn": 1234})


def smt(**props: str) -> ExtractNewRecordState:
    t = ExtractNewRecordState()
    t.configure(props)
    return t


def test_creates_and_updates_become_the_after_row_with_added_fields_and_headers() -> None:
    t = smt(**{"add.fields": "op,table,source.lsn", "add.headers": "op"})
    out = t.apply(event("u", None, ("1", "one")))
    assert out.value.values == {"id": 1, "name": "one", "__op": "u", "__table": "items", "__source_lsn": "1234"}
    assert [f.name for f in out.value_schema.fields] == ["id", "name", "__op", "__table", "__source_lsn"]
    assert out.value_schema.name == "db1.public.items.Value"
    assert [(h.key, h.value) for h in out.headers] == [("__op", "u")]
    assert out.key.values == {"id": 1}


def test_deletes_and_tombstones_by_mode() -> None:
    delete = event("d", ("1", "one"), None)
    tombstone = TABLE.tombstone(TABLE.row(("1", "one")), {"server": "db1"}, {"lsn": 1}, 0)
    assert smt().apply(delete) is None and smt().apply(tombstone) is None  # drop, drop.tombstones
    assert smt(**{"drop.tombstones": "false"}).apply(tombstone) is tombstone
    rewritten = smt(**{"delete.handling.mode": "rewrite"}).apply(delete)
    assert rewritten.value.values == {"id": 1, "name": "one", "__deleted": "true"}
    as_null = smt(**{"delete.tombstone.handling.mode": "tombstone"}).apply(delete)
    assert as_null.value is None and as_null.key.values == {"id": 1}
    assert smt(**{"delete.handling.mode": "rewrite"}).apply(event("c", None, ("2", "b"))).value.values[
        "__deleted"] == "false"


def test_records_that_are_not_change_events_pass_unchanged() -> None:
    plain = SourceRecord("t", "just a string")
    assert smt().apply(plain) is plain


def test_change_events_carry_every_source_record_field() -> None:
    """Events are built without SourceRecord's __init__ (the hot path): they must still have its fields."""
    from dataclasses import fields

    record = event("c", None, ("1", "one"))
    assert set(vars(record)) == {f.name for f in fields(SourceRecord)}
    assert record.source_offset == {"lsn": 1234} and record.headers == [] and record.kafka_partition is None
