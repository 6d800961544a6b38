"""Debezium's change events: topics ``<prefix>.<schema>.<table>``, keys of the key columns, values
``{before, after, source, op, ts_ms, transaction}``, with Debezium's schema names; tombstones
after deletes. One ``TableSchema`` per captured table, rebuilt when the table changes."""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple, Protocol

from headwater.connect.api import DataException, SourceRecord
from headwater.connect.api.data import Schema, SchemaBuilder, SchemaType, Struct
from headwater.connectors.envelope import Placeholder

from .pgoutput import UNCHANGED_TOAST
from .types import ColumnType

__all__ = ["SOURCE_SCHEMA", "TRANSACTION_SCHEMA", "VERSION", "ChangeSource", "TableColumn", "TableSchema",
           "TableEvents", "column_value", "now_us", "unavailable_value"]

VERSION = "2.7.0.Final-headwater"  # the Debezium version whose formats these follow
_PLACEHOLDER = Placeholder()  # Debezium's default unavailable.value.placeholder
_INTEGERS = (SchemaType.INT8, SchemaType.INT16, SchemaType.INT32, SchemaType.INT64)

_STR, _OSTR = Schema(SchemaType.STRING), Schema(SchemaType.STRING, True)
_I64, _OI64 = Schema(SchemaType.INT64), Schema(SchemaType.INT64, True)
_SNAPSHOT = Schema(SchemaType.STRING, True, name="io.debezium.data.Enum", version=1, default="false",
                   parameters=(("allowed", "true,first,first_in_data_collection,last_in_data_collection,last,"
                                           "false,incremental"),))
SOURCE_SCHEMA = (SchemaBuilder.struct().name("io.debezium.connector.postgresql.Source")
                 .field("version", _STR).field("connector", _STR).field("name", _STR).field("ts_ms", _I64)
                 .field("snapshot", _SNAPSHOT).field("db", _STR).field("sequence", _OSTR).field("ts_us", _OI64)
                 .field("ts_ns", _OI64).field("schema", _STR).field("table", _STR).field("txId", _OI64)
                 .field("lsn", _OI64).field("xmin", _OI64).build())
TRANSACTION_SCHEMA = (SchemaBuilder.struct().name("event.block").version(1).optional()
                      .field("id", _STR).field("total_order", _I64).field("data_collection_order", _I64).build())


@dataclass(frozen=True)
class TableColumn:
    name: str
    type: ColumnType
    key: bool
    not_null: bool
    position: int  # in the table's full row (columns may be left out by column.include/exclude.list)
    type_oid: int = 0
    placeholder: Placeholder = _PLACEHOLDER  # unavailable.value.placeholder

    @cached_property
    def unavailable(self) -> Any:
        """The value of an unchanged TOAST value (None: the type has no placeholder)."""
        return unavailable_value(self.type.schema, self.placeholder)


class ChangeSource(NamedTuple):  # a tuple: one per event
    """Where an event comes from: what ``source`` says and what the offset records."""

    ts_us: int  # commit time (snapshot: read time)
    snapshot: str  # "false", "true", "first", "last", ...
    tx_id: int | None
    lsn: int | None
    commit_lsn: int | None = None
    sequence: str | None = None


class TableEvents(Protocol):
    """What the source task asks of a table: its rows and events, as Connect records (TableSchema)
    or as the converters' bytes (encoded.EncodedTable). Rows are opaque between the calls."""

    columns: list[TableColumn]
    schema: str
    table: str

    def row(self, values: tuple[Any, ...] | list[Any]) -> Any: ...

    def key(self, row: Any) -> Any: ...

    def event(self, op: str, before: Any, after: Any, src: ChangeSource, partition: dict[str, Any],
              offset: dict[str, Any], transaction: Any = None, key_row: Any = None) -> Any: ...

    def tombstone(self, key_row: Any, partition: dict[str, Any], offset: dict[str, Any], ts_ms: int) -> Any: ...


class TableSchema:
    """The key and value schemas of one table, and its events."""

    def __init__(self, prefix: str, database: str, schema: str, table: str, columns: list[TableColumn]) -> None:
        self.prefix, self.database, self.schema, self.table = prefix, database, schema, table
        self.topic = f"{prefix}.{schema}.{table}"
        self.columns = columns
        self.key_columns = [c for c in columns if c.key]
        base = f"{prefix}.{schema}.{table}"
        self.key_schema: Schema | None = None
        if self.key_columns:
            kb = SchemaBuilder.struct().name(f"{base}.Key")
            for c in self.key_columns:
                kb.field(c.name, _required(c.type.schema))
            self.key_schema = kb.build()
        vb = SchemaBuilder.struct().name(f"{base}.Value").optional()
        for c in columns:
            vb.field(c.name, _required(c.type.schema) if c.not_null else c.type.schema)
        self.row_schema = vb.build()
        self._source_base: dict[str, Any] | None = None
        self.envelope = (SchemaBuilder.struct().name(f"{base}.Envelope").version(2)
                         .field("before", self.row_schema).field("after", self.row_schema)
                         .field("source", SOURCE_SCHEMA).field("op", _STR).field("ts_ms", _OI64)
                         .field("ts_us", _OI64).field("ts_ns", _OI64).field("transaction", TRANSACTION_SCHEMA)
                         .build())

    def row(self, values: tuple[Any, ...] | list[Any]) -> Struct:
        """A row's text values (None: NULL; UNCHANGED: an unchanged TOAST value) as the Value struct.
        A value that cannot be converted, or that leaves a NOT NULL column null, raises DataException
        naming the table and column (``conversion_error``)."""
        out: dict[str, Any] = {}
        count = len(values)
        try:
            for column in self.columns:
                text = values[column.position] if column.position < count else None
                value = column.type.convert(text) if type(text) is str else column_value(column, text)
                if value is None and column.not_null:
                    raise DataException("null for a NOT NULL column")
                out[column.name] = value
        except Exception as exc:
            raise self.conversion_error(values, exc) from exc
        return _struct(self.row_schema, out)

    def conversion_error(self, values: tuple[Any, ...] | list[Any], exc: Exception) -> DataException:
        """The error of a row that does not convert (the rare path: each column is tried again to find the
        one that fails), naming the table, the column, its type and the problem."""
        count = len(values)
        for column in self.columns:
            text = values[column.position] if column.position < count else None
            try:
                value = column.type.convert(text) if type(text) is str else column_value(column, text)
            except Exception as error:
                problem = f"{type(error).__name__}: {error}"
            else:
                if value is not None or not column.not_null:
                    continue
                problem = ("an unchanged TOAST value has no placeholder of this type" if text is UNCHANGED_TOAST
                           else f"{_shown(text)} converts to null"
                           + (" (NaN and infinities have no Decimal form: decimal.handling.mode=string or double "
                              "keeps them)" if column.type.schema.name in _DECIMALS else ""))
            kind = (column.type.schema.name or column.type.schema.type.value) + (", NOT NULL" if column.not_null
                                                                                  else "")
            return DataException(f"Cannot convert column {column.name} ({kind}) of table {self.schema}.{self.table}: "
                                 f"{problem}")
        return DataException(f"Cannot convert a row of table {self.schema}.{self.table}: {type(exc).__name__}: {exc}")

    def key(self, row: Struct | None) -> Struct | None:
        if self.key_schema is None or row is None:
            return None
        return Struct(self.key_schema, {c.name: row.values.get(c.name) for c in self.key_columns})

    def source_base(self, src: ChangeSource) -> dict[str, Any]:
        """What every event of one transaction shares in ``source`` (sequence and lsn are left None):
        built once per transaction, the same dict until the transaction changes."""
        base = self._source_base
        if base is None or base["ts_us"] != src.ts_us or base["txId"] != src.tx_id or \
                base["snapshot"] != src.snapshot:
            base = self._source_base = {
                "version": VERSION, "connector": "postgresql", "name": self.prefix, "ts_ms": src.ts_us // 1000,
                "snapshot": src.snapshot, "db": self.database, "sequence": None, "ts_us": src.ts_us,
                "ts_ns": src.ts_us * 1000, "schema": self.schema, "table": self.table, "txId": src.tx_id,
                "lsn": None, "xmin": None}
        return base

    def event(self, op: str, before: Struct | None, after: Struct | None, src: ChangeSource,
              partition: dict[str, Any], offset: dict[str, Any], transaction: Struct | None = None,
              key_row: Struct | None = None) -> SourceRecord:
        now = now_us()
        values = self.source_base(src).copy()
        values["sequence"], values["lsn"] = src.sequence, src.lsn
        source = _struct(SOURCE_SCHEMA, values)
        value = _struct(self.envelope, {"before": before, "after": after, "source": source, "op": op,
                                        "ts_ms": now // 1000, "ts_us": now, "ts_ns": now * 1000,
                                        "transaction": transaction})
        key = self.key(key_row if key_row is not None else (after if after is not None else before))
        key_schema = self.key_schema if key is not None else None  # a truncate has no key, nor key schema
        return _record(self.topic, value, key, key_schema, self.envelope, src.ts_us // 1000, partition, offset)

    def tombstone(self, key_row: Struct | None, partition: dict[str, Any], offset: dict[str, Any],
                  ts_ms: int) -> SourceRecord:
        return _record(self.topic, None, self.key(key_row), self.key_schema, None, ts_ms, partition, offset)


def column_value(column: TableColumn, text: Any) -> Any:
    """A column's Connect value from its text form, or from None (NULL, or left out) and UNCHANGED_TOAST."""
    if text is None:
        # A NOT NULL column without a value (a delete's or key change's old key leaves the other columns
        # out): Debezium's fallback for the type, valid against the column's schema.
        return column.type.zero if column.not_null else None
    if text is UNCHANGED_TOAST:
        value = column.unavailable
        return value.copy() if type(value) is list else value  # each event its own list
    return column.type.convert(text)


def unavailable_value(schema: Schema, placeholder: Placeholder) -> Any:
    """The placeholder in the shape Debezium gives a column of this schema (UnchangedToastedPlaceholder): the
    text (strings), the bytes (bytea), a one-element list of the text or bytes (arrays of them; of uuids the
    bytes' name-based UUID), the bytes as integers (integer and date arrays). None where no shape fits (a
    numeric, an array of floats or booleans: Debezium fails on these too)."""
    if schema.type == SchemaType.STRING:
        return placeholder.text
    if schema.type == SchemaType.BYTES and schema.name is None:
        return placeholder.binary
    element = schema.value_schema
    if schema.type != SchemaType.ARRAY or element is None:
        return None
    if element.type == SchemaType.STRING:
        return [placeholder.uuid if element.name == "io.debezium.data.Uuid" else placeholder.text]
    if element.type == SchemaType.BYTES and element.name is None:
        return [placeholder.binary]
    # Debezium's own integer placeholder is for int4, int8 and date arrays; every integer element holds it
    return list(placeholder.ints) if element.type in _INTEGERS else None


_DECIMALS = ("org.apache.kafka.connect.data.Decimal", "io.debezium.data.VariableScaleDecimal")


def _shown(text: Any) -> str:
    """A value in an error message: its text form, cut short."""
    shown = repr(text)
    return shown if len(shown) <= 80 else shown[:77] + "..."


def now_us() -> int:
    """The envelope's processing time (ts_ms, ts_us, ts_ns)."""
    return time.time_ns() // 1000


def _record(topic: str, value: Any, key: Any, key_schema: Schema | None, value_schema: Schema | None,
            timestamp: int, partition: dict[str, Any], offset: dict[str, Any]) -> SourceRecord:
    """A SourceRecord without the dataclass's __init__ (the hot path; the fields are the same)."""
    out = object.__new__(SourceRecord)
    out.__dict__.update(topic=topic, value=value, key=key, kafka_partition=None, key_schema=key_schema,
                        value_schema=value_schema, timestamp=timestamp, headers=[], source_partition=partition,
                        source_offset=offset)
    return out


def _struct(schema: Schema, values: dict[str, Any]) -> Struct:
    """A Struct of a schema known to be a struct's, without the dataclass's checks (the hot path)."""
    out = object.__new__(Struct)
    out.schema, out.values = schema, values
    return out


def _required(schema: Schema) -> Schema:
    return Schema(schema.type, False, schema.name, schema.version, schema.doc, schema.parameters, schema.default,
                  schema.fields, schema.key_schema, schema.value_schema)
