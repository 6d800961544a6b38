"""Change events written straight as JsonConverter's bytes: the streaming fast path.

With no transforms in the way, the worker lets the task write what its converters would
(``SourceTask.encode_with``). Converting an event through Connect values costs more than reading
it from the server: a Struct per row, per ``source`` block and per envelope, then a writer per
field. Here a row's JSON is joined from its columns' text forms (an integer column's text *is* its
JSON), the ``source`` block from a template made once per transaction, and each piece of JSON
comes from the converter's own writers (``payload_writer``), so the bytes are the converter's.
tests/unit/test_postgres_encoded.py compares them with ``from_connect_data`` for every mapped type.

``EncodedTable`` answers the calls ``PostgresSourceTask`` makes of a ``TableSchema`` (row, key,
event, tombstone), so which events a change makes is decided in one place for both paths.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from headwater.connect.api import DataException, SourceRecord
from headwater.connect.api.data import Schema, SchemaType
from headwater.connect.converters.json import JsonConverter

from .events import SOURCE_SCHEMA, TRANSACTION_SCHEMA, ChangeSource, TableColumn, TableSchema, column_value, now_us

__all__ = ["EncodedRecord", "EncodedTable", "Encoders", "encodes"]

EncodedRecord = tuple[str, bytes | None, bytes | None, int | None]  # topic, key, value, timestamp ms
_INTS = (SchemaType.INT16, SchemaType.INT32, SchemaType.INT64)
_MAX_INT64 = (1 << 63) - 1


def encodes(key_converter: Any, value_converter: Any) -> bool:
    """Whether these converters are ones the fast path writes for (JsonConverter itself, not a subclass)."""
    return type(key_converter) is JsonConverter and type(value_converter) is JsonConverter


class Encoders:
    """The worker's key and value converters, and what every table's encoder shares."""

    def __init__(self, key: JsonConverter, value: JsonConverter) -> None:
        self.key, self.value = key, value
        self.source_fields = [(value.field_name(f.name), value.payload_writer(f.schema), f.name)
                              for f in SOURCE_SCHEMA.fields or ()]
        writers = {field: write for _, write, field in self.source_fields}
        self.sequence, self.lsn = writers["sequence"], writers["lsn"]
        assert [f for _, _, f in self.source_fields if f in ("sequence", "lsn")] == ["sequence", "lsn"]
        self.op = {op: value.payload_writer(Schema(SchemaType.STRING))(op) for op in "rcudt"}
        self.no_transaction = value.payload_writer(TRANSACTION_SCHEMA)(None)

    def record(self, record: SourceRecord) -> EncodedRecord:
        """Any other record (heartbeats), through the converters as the worker would."""
        topic = record.topic
        return (topic, self.key.from_connect_data(topic, record.key_schema, record.key),
                self.value.from_connect_data(topic, record.value_schema, record.value), record.timestamp)


def _cell(converter: JsonConverter, column: TableColumn, schema: Schema) -> Callable[[Any], str]:
    """A column's JSON inside a row, from its text form (or None / UNCHANGED_TOAST, the rare cases)."""
    write = converter.payload_writer(schema)
    convert = column.type.convert
    if convert is int and schema.name is None and schema.type in _INTS:
        def integer(text: Any) -> str:  # the server writes an int2/4/8 (or oid) as its JSON number
            return text if type(text) is str else write(column_value(column, text))
        return integer
    if convert is str:
        def string(text: Any) -> str:
            return write(text if type(text) is str else column_value(column, text))
        return string

    def other(text: Any) -> str:
        return write(convert(text) if type(text) is str else column_value(column, text))
    return other


class EncodedRow:
    """A row's JSON, and its key's JSON (None for a table without key columns)."""

    __slots__ = ("json", "key")

    def __init__(self, json: str, key: str | None) -> None:
        self.json, self.key = json, key


class EncodedTable:
    """One table's events as JsonConverter's bytes (see the module's docstring)."""

    def __init__(self, table: TableSchema, encoders: Encoders) -> None:
        self.base, self.encoders = table, encoders
        self.columns, self.key_columns, self.topic = table.columns, table.key_columns, table.topic
        self.schema, self.table = table.schema, table.table
        value, key = encoders.value, encoders.key
        fields = {f.name: f.schema for f in table.row_schema.fields or ()}
        self.cells = [(column.position, value.field_name(column.name), _cell(value, column, fields[column.name]))
                      for column in table.columns]
        self.key_cells: list[tuple[int, str, Callable[[Any], str]]] = []
        if table.key_schema is not None:
            key_fields = {f.name: f.schema for f in table.key_schema.fields or ()}
            self.key_cells = [(column.position, key.field_name(column.name),
                               _cell(key, column, key_fields[column.name])) for column in table.key_columns]
        # A key column is NOT NULL, so its schema is the same in the key and in the row: with the same
        # settings on both converters, the key's JSON is made of the row's pieces.
        self.key_from_row = [self.cells.index(c) for c in self.cells if c[0] in {k.position for k in
                                                                                 table.key_columns}] \
            if (key.decimal_format, key.replace_null_with_default) == \
            (value.decimal_format, value.replace_null_with_default) and self.key_cells else None
        self.key_envelope = key.envelope(table.key_schema)
        prefix, suffix = value.envelope(table.envelope)
        self.null_row = value.payload_writer(table.row_schema)(None)
        n = [value.field_name(f) for f in ("before", "after", "source", "op", "ts_ms", "ts_us", "ts_ns",
                                           "transaction")]
        # The envelope's text between the parts that change: before, after, source, op, the three times.
        self.pieces = (prefix + "{" + n[0], "," + n[1], "," + n[2])
        self.after_op = {op: "," + n[3] + text + "," + n[4] for op, text in encoders.op.items()}
        self.after_ms, self.after_us = "," + n[5], "," + n[6]
        self.end = "000," + n[7] + encoders.no_transaction + "}" + suffix  # ts_ns is ts_us followed by 000
        self.template_of: dict[str, Any] | None = None
        self.template: tuple[str, str, str] = ("", "", "")

    def row(self, values: tuple[Any, ...] | list[Any]) -> EncodedRow:
        count = len(values)
        try:
            parts = [name + cell(values[pos] if pos < count else None) for pos, name, cell in self.cells]
        except Exception as exc:  # the same error, naming the column, as the Connect-value path raises
            raise self.base.conversion_error(values, exc) from exc
        key = None
        if self.key_from_row is not None:
            key = "{" + ",".join([parts[i] for i in self.key_from_row]) + "}"
        elif self.key_cells:
            key = "{" + ",".join([name + cell(values[pos] if pos < count else None)
                                  for pos, name, cell in self.key_cells]) + "}"
        return EncodedRow("{" + ",".join(parts) + "}", key)

    def key(self, row: EncodedRow | None) -> str | None:
        return None if row is None else row.key

    def _source(self, src: ChangeSource) -> tuple[str, str, str, str, str]:
        base = self.base.source_base(src)
        if base is not self.template_of:  # a new transaction: the text around sequence and lsn
            pieces, current = [], "{"
            for name, write, field in self.encoders.source_fields:
                current += name if current == "{" else "," + name
                if field in ("sequence", "lsn"):
                    pieces.append(current)
                    current = ""
                else:
                    current += write(base[field])
            self.template = (pieces[0], pieces[1], current + "}")
            self.template_of = base
        head, middle, tail = self.template
        sequence, lsn = src.sequence, src.lsn
        enc = self.encoders
        return (head, enc.sequence(sequence) if sequence is not None else "null", middle,
                str(lsn) if type(lsn) is int and 0 <= lsn <= _MAX_INT64 else enc.lsn(lsn), tail)

    def _key_bytes(self, key: str | None) -> bytes | None:
        if key is None:
            return None
        prefix, suffix = self.key_envelope
        return _utf8(prefix + key + suffix)

    def event(self, op: str, before: EncodedRow | None, after: EncodedRow | None, src: ChangeSource,
              partition: dict[str, Any], offset: dict[str, Any], transaction: Any = None,
              key_row: EncodedRow | None = None) -> EncodedRecord:
        if transaction is not None:
            raise DataException("transaction blocks are not written by the encoded path")
        now = now_us()
        us = str(now)
        p0, p1, p2 = self.pieces
        null = self.null_row
        head, sequence, middle, lsn, tail = self._source(src)
        value = "".join([p0, before.json if before is not None else null, p1, after.json if after is not None
                         else null, p2, head, sequence, middle, lsn, tail, self.after_op[op], str(now // 1000),
                         self.after_ms, us, self.after_us, us, self.end])
        row = key_row if key_row is not None else (after if after is not None else before)
        return self.topic, self._key_bytes(row.key if row is not None else None), _utf8(value), src.ts_us // 1000

    def tombstone(self, key_row: EncodedRow | None, partition: dict[str, Any], offset: dict[str, Any],
                  ts_ms: int) -> EncodedRecord:
        return self.topic, self._key_bytes(key_row.key if key_row is not None else None), None, ts_ms


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise DataException(f"Converting a change event to JSON failed: {exc}") from exc
